import FCMCommand
import XCTest

/// Each credential command's help says what its own `--out` file holds (one table row per
/// command: `apns-key --help` once said "the service-account JSON, the .p8 key or …").
final class CredentialHelpTests: XCTestCase {
    func testOutDescribesTheCommandsOwnFile() throws {
        let expected = ["service-account": "service account's JSON", "apns-key": ".p8", "apns-cert": "certificate followed by its private key"]
        for (command, holds) in expected {
            let lines = try XCTUnwrap(Help.text(for: command)).components(separatedBy: "\n")
            let flag = try XCTUnwrap(lines.firstIndex { $0.hasPrefix("  --out FILE") }, command)
            let help = lines[flag + 1]
            XCTAssertTrue(help.contains(holds), "\(command): \(help)")
            for (other, theirs) in expected where other != command {
                XCTAssertFalse(help.contains(theirs), "\(command)'s --out names \(other)'s file: \(help)")
            }
            XCTAssertEqual(lines.filter { $0.hasPrefix("  --out") }.count, 1, command)
        }
    }
}
