@testable import FCMEngine
@testable import FCMModel
@testable import FCMServer
import XCTest

/// The bound on issued access tokens: expired ones go first, then the oldest tenth.
final class AccessTokenPruneTests: XCTestCase {
    func token(_ i: Int, issued: Int64, expires: Int64) -> AccessToken {
        AccessToken(id: String(i), token: "t\(i)", clientEmail: "e", privateKeyID: "k", senderID: "s", scope: "x",
                    issuedAt: issued, expiresAt: expires)
    }

    func testExpiredGoFirstThenTheOldest() {
        let n = Engine.maxAccessTokens
        var tokens: [String: AccessToken] = [:]
        for i in 0..<(n + 1) { tokens["t\(i)"] = token(i, issued: Int64(i), expires: 1_000_000_000) }
        tokens["old"] = token(-1, issued: -5, expires: 10)  // expired at now = 100
        var pruned = tokens
        Engine.prune(&pruned, now: 100)
        XCTAssertEqual(pruned.count, n + 1 - n / 10, "the expired one, then the oldest tenth of what was over")
        XCTAssertNil(pruned["old"])
        XCTAssertNil(pruned["t0"])
        XCTAssertNil(pruned["t\(n / 10 - 1)"])
        XCTAssertNotNil(pruned["t\(n / 10)"])
        var fewer = ["a": token(1, issued: 1, expires: 50), "b": token(2, issued: 2, expires: 500)]
        Engine.prune(&fewer, now: 100)
        XCTAssertEqual(Array(fewer.keys), ["b"], "under the bound only the expired go")
    }
}
