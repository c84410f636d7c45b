import Foundation
import Platform
import XCTest

/// A closure kept in a lock and read out on every use (the store's health observer is read on
/// every commit) stays one closure: reading it costs no memory, and calling it after many reads
/// does not walk a chain of wrappers (a bare closure in a `Locked` overflowed the stack when
/// called after ~175,000 reads).
final class HandlerTests: XCTestCase {
    func testAHandlerReadOutOfALockAgainAndAgainStaysTheSame() throws {
        let calls = Locked<Int>(0)
        let kept = Locked<(reads: Int, handler: Handler<Int, Int>?)>((0, nil))
        kept.withLock { $0.handler = Handler { n in calls.withLock { $0 += 1 }; return n * 2 } }
        let before = try residentKiB()
        var last: Handler<Int, Int>?
        for _ in 0..<300_000 {
            last = kept.withLock { k -> Handler<Int, Int>? in
                k.reads += 1
                return k.handler
            }
        }
        let grown = try residentKiB() - before
        XCTAssertEqual(last?.call(21), 42)
        XCTAssertEqual(calls.withLock { $0 }, 1)
        XCTAssertLessThan(grown, 4096, "300,000 reads of a kept handler grew the process by \(grown) KiB")
    }

    private func residentKiB() throws -> Int {
        let statm = try String(contentsOfFile: "/proc/self/statm", encoding: .utf8).split(separator: " ")
        return (Int(statm[1]) ?? 0) * Int(sysconf(Int32(_SC_PAGESIZE))) / 1024
    }
}
