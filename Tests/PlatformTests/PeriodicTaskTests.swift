import Foundation
import XCTest

@testable import Platform

/// The periodic thread behind the checkpointer and the expiry sweep.
final class PeriodicTaskTests: XCTestCase {
    func testRunsUntilStoppedAndStopsOnce() {
        let runs = Locked<Int>(0)
        let task = PeriodicTask(everyMillis: 1) { runs.withLock { $0 += 1 } }
        while runs.withLock({ $0 }) < 3 { usleep(1000) }
        task.stop()
        let after = runs.withLock { $0 }
        usleep(20_000)
        XCTAssertEqual(runs.withLock { $0 }, after, "no run after stop() returned")
        task.stop()  // again: returns at once
    }

    /// Stopping from inside a run ends the thread after that run instead of waiting for itself.
    func testStopFromItsOwnRunDoesNotHang() {
        let holder = Locked<PeriodicTask?>(nil)
        let runs = Locked<Int>(0)
        let task = PeriodicTask(everyMillis: 1) {
            runs.withLock { $0 += 1 }
            holder.withLock { $0 }?.stop()
        }
        holder.withLock { $0 = task }
        let deadline = Date().addingTimeInterval(10)
        while runs.withLock({ $0 }) == 0 && Date() < deadline { usleep(1000) }
        task.stop()  // returns: the thread ended after the run that stopped it
        let total = runs.withLock { $0 }
        usleep(20_000)
        XCTAssertEqual(runs.withLock { $0 }, total)
        XCTAssertGreaterThan(total, 0)
    }
}
