import CSQLite

/// A failure reported by SQLite: the extended result code, its message and the SQL that failed.
/// Bound values are never included (they may be tokens or keys).
public struct StoreError: Error, Sendable, CustomStringConvertible {
    public let code: Int32
    public let message: String
    public let sql: String?

    public var description: String {
        "SQLite error \(code): \(message)" + (sql.map { " (in: \($0.prefix(120)))" } ?? "")
    }
}

/// A value bound to or read from a statement.
public enum SQLValue: Sendable, Equatable {
    case null
    case int(Int64)
    case text(String)
    case blob([UInt8])

    /// `.text` for a non-nil string, `.null` otherwise.
    public static func optional(_ s: String?) -> SQLValue { s.map { .text($0) } ?? .null }
    /// `.int` for a non-nil integer, `.null` otherwise.
    public static func optional(_ i: Int64?) -> SQLValue { i.map { .int($0) } ?? .null }
}

/// One SQLite connection with a cache of prepared statements.
///
/// Deliberately not Sendable: the store reaches it only through one serialized owner
/// (`Store`), so no two threads ever use it at once.
public final class SQLiteConnection {
    let db: OpaquePointer
    private var cache: [String: Statement] = [:]
    /// The send path's statements, by `HotSQL` index: looking a 600-byte SQL text up in `cache`
    /// hashed it on every use (about 2,000 instructions each, four times per send).
    private var hot: [Statement?] = Array(repeating: nil, count: HotSQL.allCases.count)

    /// SQLite's process-wide settings, made once before the first connection opens: no memory
    /// statistics (nothing reads them, and they cost every allocation a global mutex), and the
    /// VFS that writes a commit's log frames at once (`BufferedLogVFS`); whether it registered.
    private static let walBufferAvailable: Bool = {
        _ = fcm_sqlite_disable_memstatus()
        return BufferedLogVFS.registered
    }()

    /// Opens (creating when missing) the database at `path`; `:memory:` is a private in-memory one.
    /// A file is opened through SQLite's `unix-excl` VFS (see `BufferedLogVFS.baseName`): while
    /// a connection has it open, other processes cannot read it.
    ///
    /// `bufferedLog`: the write-ahead log's writes of one commit reach the file in one write, at
    /// the commit's sync (see `BufferedLogVFS`), which then flushes nothing to disk. Such a
    /// connection runs with `synchronous=FULL` from here on (that sync is where its commits reach
    /// the file; it keeps what NORMAL keeps), and is granted (`hasBufferedLog`) only on a file
    /// with power-safe overwrite (SQLite's default; `psow=0` in a URI turns it off): without it
    /// SQLite pads a commit to a sector with a sync in the middle of a frame, and the rest of
    /// that frame would wait in the buffer. `readOnly` opens an existing file for reading only.
    public init(path: String, bufferedLog: Bool = false, readOnly: Bool = false) throws(StoreError) {
        var buffered = Self.walBufferAvailable && bufferedLog && path != ":memory:"
        let flags = (readOnly ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE) | SQLITE_OPEN_NOMUTEX
        var handle = try Self.open(path, flags, path == ":memory:" ? nil : buffered ? BufferedLogVFS.name : BufferedLogVFS.baseName)
        if buffered {
            var psow: Int32 = -1
            if sqlite3_file_control(handle, "main", SQLITE_FCNTL_POWERSAFE_OVERWRITE, &psow) != SQLITE_OK || psow != 1 {
                sqlite3_close_v2(handle)
                buffered = false
                handle = try Self.open(path, flags, BufferedLogVFS.baseName)
            }
        }
        db = handle
        hasBufferedLog = buffered
        sqlite3_extended_result_codes(db, 1)
        if buffered { try execute("PRAGMA synchronous=FULL") }
    }

    private static func open(_ path: String, _ flags: Int32, _ vfs: String?) throws(StoreError) -> OpaquePointer {
        var handle: OpaquePointer?
        let rc = sqlite3_open_v2(path, &handle, flags, vfs)
        guard rc == SQLITE_OK, let handle else {
            let msg = handle.map { String(cString: sqlite3_errmsg($0)) } ?? "cannot open"
            if let handle { sqlite3_close_v2(handle) }
            throw StoreError(code: rc, message: msg, sql: nil)
        }
        return handle
    }

    /// Whether the connection writes its log through the buffering VFS.
    public let hasBufferedLog: Bool

    deinit {
        cache.removeAll()
        hot.removeAll()
        sqlite3_close_v2(db)
    }

    /// Frees the page cache's pages that no statement holds (SQLite's `sqlite3_db_release_memory`):
    /// they are read again from the file, or the kernel's cache of it, when next needed.
    func releaseCachedPages() {
        sqlite3_db_release_memory(db)
    }

    /// Runs one or more statements that take no parameters and return nothing of interest.
    public func execute(_ sql: String) throws(StoreError) {
        var err: UnsafeMutablePointer<CChar>?
        let rc = sqlite3_exec(db, sql, nil, nil, &err)
        if rc != SQLITE_OK {
            let msg = err.map { String(cString: $0) } ?? String(cString: sqlite3_errmsg(db))
            sqlite3_free(err)
            throw StoreError(code: rc, message: msg, sql: sql)
        }
    }

    /// The cached prepared statement for `sql`, reset and with bindings cleared.
    public func statement(_ sql: String) throws(StoreError) -> Statement {
        if let s = cache[sql] {
            s.reset()
            return s
        }
        var stmt: OpaquePointer?
        let rc = sqlite3_prepare_v3(db, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &stmt, nil)
        guard rc == SQLITE_OK, let stmt else { throw error(rc, sql) }
        let s = Statement(stmt, connection: self, sql: sql)
        cache[sql] = s
        return s
    }

    /// The prepared statement for one of the send path's statements, reset. Its bindings are not
    /// cleared: its users bind every parameter.
    func statement(_ h: HotSQL) throws(StoreError) -> Statement {
        if let s = hot[h.rawValue] {
            sqlite3_reset(s.stmt)
            return s
        }
        var stmt: OpaquePointer?
        let rc = sqlite3_prepare_v3(db, h.sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &stmt, nil)
        guard rc == SQLITE_OK, let stmt else { throw error(rc, h.sql) }
        let s = Statement(stmt, connection: self, sql: h.sql)
        hot[h.rawValue] = s
        return s
    }

    /// Runs one of the send path's statements that take no parameters (`BEGIN`, `COMMIT`).
    func run(_ h: HotSQL) throws(StoreError) {
        let s = try statement(h)
        while try s.step() {}
    }

    /// Runs `sql` with `args` for its side effect.
    public func run(_ sql: String, _ args: [SQLValue] = []) throws(StoreError) {
        let s = try statement(sql)
        try s.bind(args)
        while try s.step() {}
    }

    /// Runs a query, calling `row` for each result row.
    public func query(_ sql: String, _ args: [SQLValue] = [], row: (Statement) throws(StoreError) -> Void) throws(StoreError) {
        let s = try statement(sql)
        try s.bind(args)
        while try s.step() { try row(s) }
    }

    /// The first column of the first row as an integer, or nil when there is no row or it is NULL.
    public func scalar(_ sql: String, _ args: [SQLValue] = []) throws(StoreError) -> Int64? {
        var out: Int64?
        try query(sql, args) { (s: Statement) throws(StoreError) in
            if out == nil, !s.isNull(0) { out = s.int(0) }
        }
        return out
    }

    /// A single text value from the first row.
    public func scalarText(_ sql: String, _ args: [SQLValue] = []) throws(StoreError) -> String? {
        var out: String?
        try query(sql, args) { (s: Statement) throws(StoreError) in
            if out == nil { out = s.text(0) }
        }
        return out
    }

    /// Runs `body` in one transaction: committed when it returns, rolled back when it throws.
    public func transaction<T>(_ body: () throws(StoreError) -> T) throws(StoreError) -> T {
        try run("BEGIN IMMEDIATE")
        do {
            let v = try body()
            try run("COMMIT")
            return v
        } catch {
            try? execute("ROLLBACK")
            throw error
        }
    }

    /// Resets a statement after a step loop so it can run again with new bindings.
    public func reset(_ s: Statement) throws(StoreError) {
        s.reset()
    }

    func error(_ rc: Int32, _ sql: String?) -> StoreError {
        StoreError(code: rc, message: String(cString: sqlite3_errmsg(db)), sql: sql)
    }
}

/// A prepared statement owned by its connection's cache.
public final class Statement {
    let stmt: OpaquePointer
    unowned let connection: SQLiteConnection
    let sql: String

    init(_ stmt: OpaquePointer, connection: SQLiteConnection, sql: String) {
        self.stmt = stmt
        self.connection = connection
        self.sql = sql
    }

    deinit { sqlite3_finalize(stmt) }

    func reset() {
        sqlite3_reset(stmt)
        sqlite3_clear_bindings(stmt)
    }

    /// Binds `args` to parameters 1...n.
    public func bind(_ args: [SQLValue]) throws(StoreError) {
        for (i, a) in args.enumerated() {
            let idx = Int32(i + 1)
            switch a {
            case .null: try bind(idx, nil as Int64?)
            case .int(let v): try bind(idx, v)
            case .text(let s): try bind(idx, s)
            case .blob(let bytes):
                let rc = bytes.withUnsafeBytes { buf in
                    guard let base = buf.baseAddress else { return sqlite3_bind_zeroblob(stmt, idx, 0) }
                    return sqlite3_bind_blob(stmt, idx, base, Int32(buf.count), fcm_sqlite_transient())
                }
                guard rc == SQLITE_OK else { throw connection.error(rc, sql) }
            }
        }
    }

    /// Binds an integer to parameter `i` (1-based).
    func bind(_ i: Int32, _ v: Int64) throws(StoreError) {
        let rc = sqlite3_bind_int64(stmt, i, v)
        guard rc == SQLITE_OK else { throw connection.error(rc, sql) }
    }

    /// Binds an integer, or NULL for nil, to parameter `i`.
    func bind(_ i: Int32, _ v: Int64?) throws(StoreError) {
        let rc = v.map { sqlite3_bind_int64(stmt, i, $0) } ?? sqlite3_bind_null(stmt, i)
        guard rc == SQLITE_OK else { throw connection.error(rc, sql) }
    }

    /// Binds a text, or NULL for nil, to parameter `i` (SQLite copies it).
    func bind(_ i: Int32, _ v: String?) throws(StoreError) {
        guard var v else {
            let rc = sqlite3_bind_null(stmt, i)
            guard rc == SQLITE_OK else { throw connection.error(rc, sql) }
            return
        }
        let rc = v.withUTF8 { buf -> Int32 in
            guard let base = buf.baseAddress, buf.count > 0 else { return sqlite3_bind_text(stmt, i, "", 0, fcm_sqlite_transient()) }
            return UnsafeRawPointer(base).withMemoryRebound(to: CChar.self, capacity: buf.count) {
                sqlite3_bind_text(stmt, i, $0, Int32(buf.count), fcm_sqlite_transient())
            }
        }
        guard rc == SQLITE_OK else { throw connection.error(rc, sql) }
    }

    /// Advances; true when a row is available.
    public func step() throws(StoreError) -> Bool {
        let rc = sqlite3_step(stmt)
        if rc == SQLITE_ROW { return true }
        if rc == SQLITE_DONE { return false }
        throw connection.error(rc, sql)
    }

    /// Column `i` as an integer (0 for NULL).
    public func int(_ i: Int32) -> Int64 { sqlite3_column_int64(stmt, i) }

    /// Column `i` as an integer, nil for NULL.
    public func optionalInt(_ i: Int32) -> Int64? { isNull(i) ? nil : int(i) }

    /// Column `i` as text, nil for NULL.
    public func text(_ i: Int32) -> String? {
        guard let p = sqlite3_column_text(stmt, i) else { return nil }
        let n = Int(sqlite3_column_bytes(stmt, i))
        return String(decoding: UnsafeBufferPointer(start: p, count: n), as: UTF8.self)
    }

    /// Column `i` as bytes (empty for NULL).
    public func blob(_ i: Int32) -> [UInt8] {
        // The pointer first, then its length (SQLite's documented order).
        guard let p = sqlite3_column_blob(stmt, i) else { return [] }
        let n = Int(sqlite3_column_bytes(stmt, i))
        return Array(UnsafeRawBufferPointer(start: p, count: n))
    }

    /// Whether column `i` is NULL.
    public func isNull(_ i: Int32) -> Bool { sqlite3_column_type(stmt, i) == SQLITE_NULL }
}
