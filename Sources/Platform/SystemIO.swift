#if canImport(Glibc)
    import Glibc
#endif

/// The few operating-system calls the server needs, written on libc directly so the binary does
/// not link Foundation (which costs several megabytes of resident memory and start-up time).
public enum SystemIO {
    /// What a path names.
    public enum Kind { case file, directory }

    public static func kind(of path: String) -> Kind? {
        var st = stat()
        guard stat(path, &st) == 0 else { return nil }
        return (st.st_mode & S_IFMT) == S_IFDIR ? .directory : .file
    }

    /// Writes `bytes` as the whole file (created with `mode`, or truncated); false when it fails.
    public static func writeFile(_ path: String, _ bytes: [UInt8], mode: UInt32) -> Bool {
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode_t(mode))
        guard fd >= 0 else { return false }
        defer { close(fd) }
        // A file that was there keeps its mode through open: narrowed to `mode` before a byte is
        // written (a private key written over a 0644 file must not stay readable by others).
        // (A regular file only: a device such as /dev/null keeps its mode.)
        var st = stat()
        guard fstat(fd, &st) == 0 else { return false }
        let now = UInt32(st.st_mode) & 0o777
        if (st.st_mode & S_IFMT) == S_IFREG, now & ~mode != 0, fchmod(fd, mode_t(now & mode)) != 0 { return false }
        var off = 0
        while off < bytes.count {
            let n = bytes.withUnsafeBytes { write(fd, $0.baseAddress! + off, $0.count - off) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { return false }
            off += n
        }
        return true
    }

    /// Gives the heap's free pages back to the system (glibc's `malloc_trim`, which Swift's Glibc
    /// module does not declare): after start-up parsed a large fixture into a tree now gone.
    /// Returns whether any memory went back (false too when the C library has no `malloc_trim`).
    @discardableResult
    public static func releaseFreedMemory() -> Bool {
        guard let trim = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "malloc_trim") else { return false }
        return unsafeBitCast(trim, to: (@convention(c) (Int) -> Int32).self)(0) == 1
    }

    /// Caps the malloc arenas at `n` (glibc's `mallopt(M_ARENA_MAX, n)`, not declared by
    /// Swift's Glibc module). By default glibc gives threads up to eight arenas a core; each
    /// keeps its own free memory, so a server whose threads come and go (connections, event
    /// streams) spreads its high-water marks over many arenas and its RSS creeps up.
    /// False when the C library has no such setting (not glibc).
    @discardableResult
    public static func limitMallocArenas(_ n: Int32) -> Bool {
        guard let mallopt = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "mallopt") else { return false }
        let mArenaMax: Int32 = -8
        return unsafeBitCast(mallopt, to: (@convention(c) (Int32, Int32) -> Int32).self)(mArenaMax, n) == 1
    }

    /// Serves every allocation of `bytes` or more with its own mapping, returned to the system
    /// when freed (glibc's `mallopt(M_MMAP_THRESHOLD, bytes)`; setting it also stops glibc from
    /// raising the threshold after each large free, which otherwise leaves large request bodies
    /// and answers in the arenas). False when the C library has no such setting.
    @discardableResult
    public static func mapLargeAllocations(from bytes: Int32) -> Bool {
        guard let mallopt = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "mallopt") else { return false }
        let mMmapThreshold: Int32 = -3
        return unsafeBitCast(mallopt, to: (@convention(c) (Int32, Int32) -> Int32).self)(mMmapThreshold, bytes) == 1
    }

    /// The whole file, or nil when it cannot be read.
    public static func readFile(_ path: String) -> [UInt8]? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var out: [UInt8] = []
        // Sized once (a fixture of 10,000 devices grew the array to twice its size).
        var info = stat()
        if fstat(fd, &info) == 0, info.st_size > 0 { out.reserveCapacity(Int(info.st_size) + 1) }
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n < 0 {
                if errno == EINTR { continue }
                return nil
            }
            if n == 0 { return out }
            out.append(contentsOf: chunk[0..<n])
        }
    }

    /// Names in a directory (without `.` and `..`), unsorted; nil when it cannot be listed.
    public static func list(_ path: String) -> [String]? {
        guard let dir = opendir(path) else { return nil }
        defer { closedir(dir) }
        var names: [String] = []
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
            if name != "." && name != ".." { names.append(name) }
        }
        return names
    }

    /// Creates a directory (no error when it exists).
    public static func makeDirectory(_ path: String) {
        _ = mkdir(path, 0o755)
    }

    /// `path` made absolute (symbolic links resolved when it exists), for log lines.
    public static func absolutePath(_ path: String) -> String {
        if let r = realpath(path, nil) {
            defer { free(r) }
            return String(cString: r)
        }
        if path.hasPrefix("/") { return path }
        var buf = [CChar](repeating: 0, count: Int(PATH_MAX))
        guard getcwd(&buf, buf.count) != nil else { return path }
        let cwd = String(decoding: buf.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return cwd + "/" + (path.hasPrefix("./") ? String(path.dropFirst(2)) : path)
    }

    /// Takes an exclusive advisory lock (`flock`) on `path`, created when missing, for as long
    /// as the returned descriptor stays open; the kernel drops it when the process dies, so no
    /// stale lock outlives a crash. `flock` locks are apart from the POSIX record locks SQLite
    /// takes on the same file, so the two do not interfere.
    public static func lockExclusively(_ path: String) -> LockResult {
        let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        guard fd >= 0 else { return .unavailable }
        if flock(fd, LOCK_EX | LOCK_NB) == 0 { return .locked(fd) }
        var st = stat()
        let inode = fstat(fd, &st) == 0 ? UInt64(st.st_ino) : nil
        close(fd)
        return .heldByAnother(pid: inode.flatMap(flockHolder))
    }

    public enum LockResult {
        case locked(Int32)
        /// Another open file description holds it (another process, as a rule): its pid when
        /// /proc/locks names it.
        case heldByAnother(pid: Int32?)
        /// The file cannot be opened (the store's own error will say why).
        case unavailable
    }

    /// The pid holding a `flock` on the file with this inode, read from /proc/locks
    /// (`1: FLOCK  ADVISORY  WRITE 1234 fe:01:5678 0 EOF`).
    private static func flockHolder(inode: UInt64) -> Int32? {
        guard let bytes = readFile("/proc/locks") else { return nil }
        for line in String(decoding: bytes, as: UTF8.self).split(separator: "\n") {
            let f = line.split(separator: " ")
            guard f.count >= 6, f[1] == "FLOCK", f[3] == "WRITE", f[5].split(separator: ":").last.flatMap({ UInt64($0) }) == inode
            else { continue }
            return Int32(f[4])
        }
        return nil
    }

    /// Writes a line to standard error in one call, so lines from threads do not interleave.
    public static func writeStderr(_ text: String) {
        writeStderr(Array(text.utf8))
    }

    /// Writes `bytes` to standard error, all of them unless the stream fails.
    public static func writeStderr(_ bytes: [UInt8]) {
        var off = 0
        while off < bytes.count {
            let n = bytes.withUnsafeBytes { write(2, $0.baseAddress! + off, $0.count - off) }
            if n <= 0 { return }
            off += n
        }
    }

    /// The process environment.
    public static func environment() -> [String: String] {
        var out: [String: String] = [:]
        var p = environ
        while let entry = p.pointee {
            let s = String(cString: entry)
            if let eq = s.firstIndex(of: "=") { out[String(s[..<eq])] = String(s[s.index(after: eq)...]) }
            p += 1
        }
        return out
    }
}

/// Writes `text` to standard error (for the executable).
public func writeToStandardError(_ text: String) { SystemIO.writeStderr(text) }

/// The process environment (for the executable).
public func processEnvironment() -> [String: String] { SystemIO.environment() }
