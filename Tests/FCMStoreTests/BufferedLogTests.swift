@testable import FCMStore
import Foundation
import XCTest

/// The buffering VFS (`BufferedLogVFS`): a commit's log frames reach the file in one write at the
/// commit's sync, so every commit is in the file before it returns, whatever its size.
final class BufferedLogTests: XCTestCase {
    var dir: String!

    override func setUpWithError() throws {
        dir = NSTemporaryDirectory() + "fcm-walbuf-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
    }

    override func tearDown() {
        try? FileManager.default.removeItem(atPath: dir)
    }

    func count(_ c: SQLiteConnection) throws -> Int64? {
        try c.scalar("SELECT count(*) FROM t")
    }

    func testAFileStoreWritesThroughItAndMemoryDoesNot() throws {
        let file = try Store(path: dir + "/s.sqlite")
        XCTAssertTrue(file.bufferedLog)
        XCTAssertEqual(try file.readSQL { (c: SQLiteConnection) throws(StoreError) in try c.scalar("PRAGMA synchronous") }, 2,
                       "FULL, whose per-commit sync is where the frames are written")
        file.close()
        let memory = try Store(path: ":memory:")
        XCTAssertFalse(memory.bufferedLog)
        memory.close()
    }

    /// Another connection of the process (without the buffer, as the checkpointer's) reads
    /// every commit as soon as it returned: small ones, one far larger than the buffer, and
    /// again after a checkpoint and a reopen.
    func testEveryCommitIsInTheFileWhenItReturns() throws {
        let path = dir + "/t.sqlite"
        let writer = try SQLiteConnection(path: path, bufferedLog: true)
        XCTAssertTrue(writer.hasBufferedLog)
        try writer.execute("PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL; CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT)")
        let reader = try SQLiteConnection(path: path)
        XCTAssertFalse(reader.hasBufferedLog)
        for i in 1...50 {
            try writer.transaction { () throws(StoreError) in
                try writer.run("INSERT INTO t(id, v) VALUES (?, ?)", [.int(Int64(i)), .text(String(repeating: "x", count: 300))])
            }
            XCTAssertEqual(try count(reader), Int64(i), "commit \(i) readable at once")
        }
        // About 1.2 MB of pages: many times the VFS's 64 KiB buffer.
        try writer.transaction { () throws(StoreError) in
            for i in 51...4050 {
                try writer.run("INSERT INTO t(id, v) VALUES (?, ?)", [.int(Int64(i)), .text(String(repeating: "y", count: 300))])
            }
        }
        XCTAssertEqual(try count(reader), 4050)
        XCTAssertEqual(try reader.scalarText("SELECT v FROM t WHERE id = 4050"), String(repeating: "y", count: 300))
        // A rolled-back transaction (its second insert breaks the primary key) leaves nothing a
        // reader or the next commit sees.
        XCTAssertThrowsError(try writer.transaction { () throws(StoreError) in
            try writer.run("INSERT INTO t(id, v) VALUES (5000, 'gone')")
            try writer.run("INSERT INTO t(id, v) VALUES (1, 'duplicate')")
        })
        try writer.run("INSERT INTO t(id, v) VALUES (4051, 'last')")
        XCTAssertEqual(try count(reader), 4051)
        XCTAssertNil(try reader.scalarText("SELECT v FROM t WHERE id = 5000"))
        try reader.execute("PRAGMA wal_checkpoint(PASSIVE)")
        try writer.run("INSERT INTO t(id, v) VALUES (4052, 'after the checkpoint')")
        XCTAssertEqual(try count(reader), 4052)
        XCTAssertEqual(try reader.scalarText("PRAGMA integrity_check"), "ok")
    }

    /// The log is left as a killed process leaves it (no checkpoint, no close): a new connection
    /// recovers every commit from it.
    func testALogLeftBehindIsRecoveredWhole() throws {
        let path = dir + "/k.sqlite"
        do {
            let writer = try SQLiteConnection(path: path, bufferedLog: true)
            try writer.execute("PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL; PRAGMA wal_autocheckpoint=0")
            try writer.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT)")
            for i in 1...200 {
                try writer.run("INSERT INTO t(id, v) VALUES (?, ?)", [.int(Int64(i)), .text(String(i))])
            }
            // Copy the files while the writer still holds them, as a kill -9 would leave them.
            for suffix in ["", "-wal"] {
                try FileManager.default.copyItem(atPath: path + suffix, toPath: dir + "/copy.sqlite" + suffix)
            }
        }
        let recovered = try SQLiteConnection(path: dir + "/copy.sqlite")
        XCTAssertEqual(try count(recovered), 200)
        XCTAssertEqual(try recovered.scalarText("SELECT v FROM t WHERE id = 200"), "200")
        XCTAssertEqual(try recovered.scalarText("PRAGMA integrity_check"), "ok")
    }

    /// A buffered connection always runs at FULL (its commits reach the file at that sync), and
    /// is granted only with power-safe overwrite: with `psow=0` SQLite would sync in the middle
    /// of a frame, so such a connection writes its log unbuffered.
    func testBufferingNeedsPowerSafeOverwriteAndRunsAtFull() throws {
        let path = dir + "/p.sqlite"
        let plain = try SQLiteConnection(path: path, bufferedLog: true)
        XCTAssertTrue(plain.hasBufferedLog)
        XCTAssertEqual(try plain.scalar("PRAGMA synchronous"), 2)
        let unsafe = try SQLiteConnection(path: "file:\(path)?psow=0", bufferedLog: true)
        XCTAssertFalse(unsafe.hasBufferedLog)
        try unsafe.execute("PRAGMA journal_mode=WAL; CREATE TABLE t(x); INSERT INTO t VALUES (1)")
        XCTAssertEqual(try count(unsafe), 1)
        XCTAssertFalse(try SQLiteConnection(path: dir + "/q.sqlite").hasBufferedLog)
    }
}
