import CSQLite

#if canImport(Glibc)
    import Glibc
#endif

/// A VFS over SQLite's default one that hands the frames of a commit to the kernel in one write.
///
/// SQLite writes each frame of its write-ahead log as two writes (a 24-byte frame header, then
/// the page), so a send's commit of two pages cost four pwrite calls, each paying the file
/// system's per-call work (a tenth of a sequential send's CPU). Here writes to a log file that
/// follow each other are gathered in memory and passed on in one write when SQLite syncs the log
/// at the end of the commit (the store's writer runs with `synchronous=FULL` for that), or sooner
/// when the buffer is full, or when SQLite writes elsewhere in the file, reads it, asks its size,
/// truncates or closes it.
///
/// A sync that finds gathered bytes only passes them on, without fsync: commits are as durable
/// as `synchronous=NORMAL` makes them (in the kernel before the commit is visible to any reader
/// or answered: they survive the process being killed, not a power loss). A sync that finds
/// nothing gathered (a checkpoint's, before it copies the log into the database) is a real one.
/// A failed write is reported by the call that passes the bytes on, so the commit fails and
/// SQLite rolls it back; nothing in the log past the last commit is ever read.
///
/// Each open file is SQLite's allocation of `szOsFile` bytes: the `sqlite3_file` header with
/// our methods, the buffer's state at fixed offsets, then the underlying VFS's own file.
enum BufferedLogVFS {
    static let name = "fcm-walbuf"
    /// The VFS underneath, which every file connection of the store uses: SQLite's `unix-excl`
    /// takes one lock on the file for the whole process instead of a lock call (`fcntl`) at each
    /// step of every transaction (six a commit), and keeps the log's index in the heap, shared by
    /// the process's connections, instead of a mapped `-shm` file. So no other process can open
    /// the store while the server runs; the server allows only one process per store anyway.
    static let baseName = "unix-excl"

    /// Registers the VFS once; whether it is available.
    static let registered: Bool = {
        guard let real = sqlite3_vfs_find(baseName) else { return false }
        realVFS = real
        let vfs = UnsafeMutablePointer<sqlite3_vfs>.allocate(capacity: 1)  // lives as long as the process
        vfs.initialize(to: real.pointee)  // the time, randomness and library methods as they are
        vfs.pointee.pNext = nil
        vfs.pointee.zName = UnsafePointer(strdup(name))
        vfs.pointee.szOsFile = Int32(File.realOffset) + real.pointee.szOsFile
        vfs.pointee.xOpen = open
        vfs.pointee.xDelete = { _, name, syncDir in realVFS.pointee.xDelete(realVFS, name, syncDir) }
        vfs.pointee.xAccess = { _, name, flags, out in realVFS.pointee.xAccess(realVFS, name, flags, out) }
        vfs.pointee.xFullPathname = { _, name, n, out in realVFS.pointee.xFullPathname(realVFS, name, n, out) }
        return sqlite3_vfs_register(vfs, 0) == SQLITE_OK
    }()

    /// Enough for a batch of sends (a few pages each); a larger transaction is passed on in
    /// pieces. SQLite's unix VFSes write at most 128 KiB - 1 bytes per call (its write loop masks
    /// the length to 17 bits), so a piece must stay below that.
    static let capacity = 64 * 1024

    /// The underlying VFS (`baseName`), set once by `registered` before any file is opened through ours.
    /// `nonisolated(unsafe)`: written once, before registration publishes the VFS; read-only after.
    nonisolated(unsafe) static var realVFS: UnsafeMutablePointer<sqlite3_vfs>!

    /// One open file, seen through its `sqlite3_file` pointer.
    struct File {
        static let bufferOffset = 8, lengthOffset = 16, positionOffset = 24, realOffset = 32
        let raw: UnsafeMutableRawPointer
        init(_ file: UnsafeMutablePointer<sqlite3_file>?) { raw = UnsafeMutableRawPointer(file!) }

        var real: UnsafeMutablePointer<sqlite3_file> { (raw + Self.realOffset).assumingMemoryBound(to: sqlite3_file.self) }
        var methods: sqlite3_io_methods { real.pointee.pMethods.pointee }
        /// Log files only: the bytes written and not yet passed on.
        var buffer: UnsafeMutableRawPointer? {
            get { raw.load(fromByteOffset: Self.bufferOffset, as: UnsafeMutableRawPointer?.self) }
            nonmutating set { raw.storeBytes(of: newValue, toByteOffset: Self.bufferOffset, as: UnsafeMutableRawPointer?.self) }
        }
        var length: Int {
            get { raw.load(fromByteOffset: Self.lengthOffset, as: Int.self) }
            nonmutating set { raw.storeBytes(of: newValue, toByteOffset: Self.lengthOffset, as: Int.self) }
        }
        /// Where the buffer's first byte goes in the file.
        var position: Int64 {
            get { raw.load(fromByteOffset: Self.positionOffset, as: Int64.self) }
            nonmutating set { raw.storeBytes(of: newValue, toByteOffset: Self.positionOffset, as: Int64.self) }
        }

        /// Calls the underlying VFS's method on its own file.
        func forward<R>(_ call: (sqlite3_io_methods, UnsafeMutablePointer<sqlite3_file>) -> R) -> R { call(methods, real) }

        /// Passes the gathered bytes on. They are dropped whatever the outcome: after a failed
        /// write SQLite rolls the transaction back and writes those frames again, if ever.
        /// Outside a commit's sync (`atCommit` false: a read, a size, a truncate, a spill) a
        /// failure is reported as `SQLITE_IOERR_WRITE` whatever the cause: SQLite may take a
        /// `SQLITE_FULL` there for one statement's and carry on with a transaction whose frames
        /// it believes written; an I/O error makes it roll the whole transaction back.
        func flush(atCommit: Bool = false) -> Int32 {
            let n = length
            guard n > 0, let buffer else { return SQLITE_OK }
            length = 0
            let rc = methods.xWrite(real, buffer, Int32(n), position)
            return rc == SQLITE_OK || atCommit ? rc : SQLITE_IOERR | 3 << 8  // SQLITE_IOERR_WRITE
        }
    }

    static let open: @convention(c) (UnsafeMutablePointer<sqlite3_vfs>?, sqlite3_filename?, UnsafeMutablePointer<sqlite3_file>?,
                                     Int32, UnsafeMutablePointer<Int32>?) -> Int32 = { _, name, file, flags, outFlags in
        let f = File(file)
        f.raw.initializeMemory(as: UInt8.self, repeating: 0, count: File.realOffset)
        var rc = realVFS.pointee.xOpen(realVFS, name, f.real, flags, outFlags)
        if rc == SQLITE_OK && f.real.pointee.pMethods.pointee.iVersion < 3 { rc = SQLITE_CANTOPEN }  // every method is forwarded
        if rc == SQLITE_OK && flags & SQLITE_OPEN_WAL != 0 {
            f.buffer = UnsafeMutableRawPointer.allocate(byteCount: capacity, alignment: 16)
        }
        if rc != SQLITE_OK {
            if let m = f.real.pointee.pMethods { _ = m.pointee.xClose(f.real) }
            file!.pointee.pMethods = nil
            return rc
        }
        file!.pointee.pMethods = UnsafePointer(methods)
        return SQLITE_OK
    }

    /// Our methods: the log's buffer in `xWrite`, `xSync` and whatever must see the file as
    /// written; everything else forwarded. `nonisolated(unsafe)`: filled once, here, and only
    /// read after.
    nonisolated(unsafe) static let methods: UnsafeMutablePointer<sqlite3_io_methods> = {
        let m = UnsafeMutablePointer<sqlite3_io_methods>.allocate(capacity: 1)  // lives as long as the process
        m.initialize(to: sqlite3_io_methods())
        m.pointee.iVersion = 3
        m.pointee.xClose = { file in
            let f = File(file)
            let rc = f.flush()
            let rc2 = f.methods.xClose(f.real)
            f.buffer?.deallocate()
            f.buffer = nil
            return rc != SQLITE_OK ? rc : rc2
        }
        m.pointee.xRead = { file, out, amount, offset in
            let f = File(file)
            let rc = f.flush()
            return rc != SQLITE_OK ? rc : f.methods.xRead(f.real, out, amount, offset)
        }
        m.pointee.xWrite = { file, data, amount, offset in
            let f = File(file)
            guard let buffer = f.buffer, let data else { return f.methods.xWrite(f.real, data, amount, offset) }
            let n = Int(amount)
            if f.length > 0 && offset == f.position + Int64(f.length) && f.length + n <= capacity {
                (buffer + f.length).copyMemory(from: data, byteCount: n)
                f.length += n
                return SQLITE_OK
            }
            let rc = f.flush()
            if rc != SQLITE_OK { return rc }
            if n > capacity { return f.methods.xWrite(f.real, data, amount, offset) }
            buffer.copyMemory(from: data, byteCount: n)
            f.length = n
            f.position = offset
            return SQLITE_OK
        }
        m.pointee.xTruncate = { file, size in
            let f = File(file)
            let rc = f.flush()
            return rc != SQLITE_OK ? rc : f.methods.xTruncate(f.real, size)
        }
        m.pointee.xSync = { file, flags in
            let f = File(file)
            // The end of a commit: into the kernel, no fsync (see above). Except after the log
            // starts over (the gathered bytes begin with its header, at offset 0): SQLite syncs
            // that header even at NORMAL, so that a power loss cannot replay the frames of the
            // log's previous cycle; that sync stays a real one (once per cycle of the log).
            if f.length > 0 {
                let startsOver = f.position == 0
                let rc = f.flush(atCommit: true)
                return rc != SQLITE_OK || !startsOver ? rc : f.methods.xSync(f.real, flags)
            }
            return f.methods.xSync(f.real, flags)
        }
        m.pointee.xFileSize = { file, size in
            let f = File(file)
            let rc = f.flush()
            return rc != SQLITE_OK ? rc : f.methods.xFileSize(f.real, size)
        }
        m.pointee.xLock = { file, level in File(file).forward { $0.xLock($1, level) } }
        m.pointee.xUnlock = { file, level in File(file).forward { $0.xUnlock($1, level) } }
        m.pointee.xCheckReservedLock = { file, out in File(file).forward { $0.xCheckReservedLock($1, out) } }
        m.pointee.xFileControl = { file, op, arg in File(file).forward { $0.xFileControl($1, op, arg) } }
        m.pointee.xSectorSize = { file in File(file).forward { $0.xSectorSize($1) } }
        m.pointee.xDeviceCharacteristics = { file in File(file).forward { $0.xDeviceCharacteristics($1) } }
        m.pointee.xShmMap = { file, page, size, extend, out in File(file).forward { $0.xShmMap($1, page, size, extend, out) } }
        m.pointee.xShmLock = { file, offset, n, flags in File(file).forward { $0.xShmLock($1, offset, n, flags) } }
        m.pointee.xShmBarrier = { file in File(file).forward { $0.xShmBarrier($1) } }
        m.pointee.xShmUnmap = { file, delete in File(file).forward { $0.xShmUnmap($1, delete) } }
        m.pointee.xFetch = { file, offset, amount, out in File(file).forward { $0.xFetch($1, offset, amount, out) } }
        m.pointee.xUnfetch = { file, offset, p in File(file).forward { $0.xUnfetch($1, offset, p) } }
        return m
    }()
}
