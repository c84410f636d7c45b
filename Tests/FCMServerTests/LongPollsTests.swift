@testable import FCMEngine
import Foundation
import Platform
import XCTest

/// Which changes re-check a waiting long poll (`LongPolls`): those naming its device, those naming
/// none, and every one while its device is not known; and the rest between costly rounds.
final class LongPollsTests: XCTestCase {
    /// A poll's checks as they happen: how many, and when each started and ended.
    private final class Checks: Sendable {
        private let times = Locked<[(start: UInt64, end: UInt64)]>([])
        var count: Int { times.withLock { $0.count } }
        var all: [(start: UInt64, end: UInt64)] { times.withLock { $0 } }
        func record(_ start: UInt64) { times.withLock { $0.append((start, monotonicNanos())) } }

        /// Waits (up to 5 s) until there have been `n` checks.
        func wait(for n: Int, file: StaticString = #filePath, line: UInt = #line) {
            let until = Date().addingTimeInterval(5)
            while count < n && Date() < until { usleep(2_000) }
            XCTAssertEqual(count, n, "checks", file: file, line: line)
        }

        /// No further check within `ms` milliseconds.
        func stays(at n: Int, for ms: UInt32, file: StaticString = #filePath, line: UInt = #line) {
            usleep(ms * 1_000)
            XCTAssertEqual(count, n, "a change that does not concern the poll re-checked it", file: file, line: line)
        }
    }

    private func farDeadline() -> UInt64 { monotonicNanos() + 60_000_000_000 }

    func testOnlyChangesToItsDeviceOrToEverythingRecheckAPoll() {
        let polls = LongPolls()
        defer { polls.stop() }
        let checks = Checks()
        polls.add(deadline: farDeadline()) { final in
            checks.record(monotonicNanos())
            return final ? .answered : .waiting(device: 5)
        }
        checks.wait(for: 1)  // once at once, in case its change came before it waited
        polls.poke(devices: [6, 7])
        checks.stays(at: 1, for: 300)
        polls.poke(devices: [7, 5])
        checks.wait(for: 2)
        polls.poke()
        checks.wait(for: 3)
    }

    func testAPollOnADeviceNotKnownYetIsRecheckedOnEveryChange() {
        let polls = LongPolls()
        defer { polls.stop() }
        let checks = Checks()
        polls.add(deadline: farDeadline()) { final in
            checks.record(monotonicNanos())
            return final ? .answered : .waiting(device: nil)
        }
        checks.wait(for: 1)
        polls.poke(devices: [6])
        checks.wait(for: 2)
    }

    func testAnsweredPollsLeaveAndTheOthersStay() {
        let polls = LongPolls()
        defer { polls.stop() }
        let first = Checks(), second = Checks()
        let satisfied = Locked(false)
        polls.add(deadline: farDeadline()) { _ in
            first.record(monotonicNanos())
            return satisfied.withLock { $0 } ? .answered : .waiting(device: 1)
        }
        polls.add(deadline: farDeadline()) { final in
            second.record(monotonicNanos())
            return final ? .answered : .waiting(device: 1)
        }
        first.wait(for: 1)
        second.wait(for: 1)
        satisfied.withLock { $0 = true }
        polls.poke(devices: [1])
        first.wait(for: 2)
        second.wait(for: 2)
        polls.poke(devices: [1])
        second.wait(for: 3)
        first.stays(at: 2, for: 100)
    }

    func testADeadlineAnswersThePollWithoutAChange() {
        let polls = LongPolls()
        defer { polls.stop() }
        let finals = Locked<[Bool]>([])
        polls.add(deadline: monotonicNanos() + 100_000_000) { final in
            finals.withLock { $0.append(final) }
            return final ? .answered : .waiting(device: 3)
        }
        let until = Date().addingTimeInterval(5)
        while finals.withLock({ $0.count }) < 2 && Date() < until { usleep(2_000) }
        XCTAssertEqual(finals.withLock { $0 }, [false, true])
    }

    /// Costly checks (a status filter paging through a large inbox in the store) leave the store
    /// to others: the round a change asks for after a round of `t` starts `restFactor × t` later.
    func testARoundThatTookLongRestsBeforeTheNextChange() {
        let polls = LongPolls()
        defer { polls.stop() }
        let checks = Checks()
        polls.add(deadline: farDeadline()) { final in
            let start = monotonicNanos()
            usleep(50_000)
            checks.record(start)
            return final ? .answered : .waiting(device: 9)
        }
        checks.wait(for: 1)
        polls.poke(devices: [9])
        checks.wait(for: 2)
        let all = checks.all
        let gap = all[1].start - all[0].end
        let took = all[0].end - all[0].start
        XCTAssertGreaterThanOrEqual(gap, took * LongPolls.restFactor - 5_000_000,
                                    "the second round came \(gap / 1_000_000) ms after a 50 ms one")
    }

    /// Rounds for deadlines alone do not rest: polls whose deadlines come one after another, each
    /// final check costly, put a satisfied poll off until they end.
    func testDeadlinesOneAfterAnotherDoNotPutAChangeOff() {
        let polls = LongPolls()
        defer { polls.stop() }
        let start = monotonicNanos()
        // Thirty polls, a deadline every 40 ms from 0.2 s to 1.4 s, each answered in 20 ms.
        let lastDeadline = start + 200_000_000 + 29 * 40_000_000
        for i in 0..<30 {
            polls.add(deadline: start + 200_000_000 + UInt64(i) * 40_000_000) { final in
                guard final else { return .waiting(device: Int64(100 + i)) }
                usleep(20_000)
                return .answered
            }
        }
        let satisfied = Locked(false)
        let answeredAt = Locked<UInt64?>(nil)
        polls.add(deadline: farDeadline()) { final in
            guard final || satisfied.withLock({ $0 }) else { return .waiting(device: 7) }
            answeredAt.withLock { $0 = monotonicNanos() }
            return .answered
        }
        usleep(400_000)  // the deadline rounds are under way
        satisfied.withLock { $0 = true }
        polls.poke(devices: [7])
        let until = Date().addingTimeInterval(10)
        while answeredAt.withLock({ $0 }) == nil && Date() < until { usleep(2_000) }
        let at = try? XCTUnwrap(answeredAt.withLock { $0 })
        XCTAssertNotNil(at)
        XCTAssertLessThan(at ?? .max, lastDeadline, "the change waited for the deadline rounds to end")
    }

    /// A stop while a round checks a poll leaves that poll to the round: answered once, whether
    /// the round's check answers it or leaves it waiting.
    func testAStopDuringARoundAnswersEachPollOnce() {
        let polls = LongPolls()
        let answers = Locked<[String: [Bool]]>([:])
        let inCheck = Locked(0)
        for (name, satisfied) in [("met", true), ("unmet", false)] {
            polls.add(deadline: farDeadline()) { final in
                if !final {
                    inCheck.withLock { $0 += 1 }
                    usleep(200_000)
                    guard satisfied else { return .waiting(device: 1) }
                }
                answers.withLock { $0[name, default: []].append(final) }
                return .answered
            }
        }
        let until = Date().addingTimeInterval(5)
        while inCheck.withLock({ $0 }) == 0 && Date() < until { usleep(2_000) }
        polls.stop()
        let settle = Date().addingTimeInterval(5)
        while answers.withLock({ $0.values.reduce(0) { $0 + $1.count } }) < 2 && Date() < settle { usleep(2_000) }
        usleep(300_000)  // a second answer would have come by now
        XCTAssertEqual(answers.withLock { $0 }, ["met": [false], "unmet": [true]])
    }

    func testStopAnswersEveryPollAndRefusesNewOnes() {
        let polls = LongPolls()
        let finals = Locked<[Bool]>([])
        polls.add(deadline: farDeadline()) { final in
            finals.withLock { $0.append(final) }
            return final ? .answered : .waiting(device: 2)
        }
        let until = Date().addingTimeInterval(5)
        while finals.withLock({ $0.count }) < 1 && Date() < until { usleep(2_000) }
        polls.stop()
        polls.add(deadline: farDeadline()) { final in
            finals.withLock { $0.append(final) }
            return .answered
        }
        XCTAssertEqual(finals.withLock { $0 }, [false, true, true])
    }
}
