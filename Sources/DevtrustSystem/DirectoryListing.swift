import Glibc

public enum DirectoryListing {
    /// The names in a directory (without `.` and `..`), sorted; nil when it cannot be read.
    public static func names(_ path: String) -> [String]? {
        guard let stream = opendir(path) else { return nil }
        defer { closedir(stream) }
        var names = [String]()
        while let entry = readdir(stream) {
            let name = entryName(entry)
            if name != "." && name != ".." { names.append(name) }
        }
        return names.sorted()
    }

    /// The name of a `readdir` entry, read up to its NUL in place. Copying
    /// `d_name` (256 bytes) would read past the entry's record, which is only
    /// as long as the name, into the rest of the buffer or beyond its end.
    public static func entryName(_ entry: UnsafeMutablePointer<dirent>) -> String {
        let name = UnsafeRawPointer(entry) + MemoryLayout<dirent>.offset(of: \dirent.d_name)!
        return String(cString: name.assumingMemoryBound(to: CChar.self))
    }

    public static func isDirectory(_ path: String) -> Bool {
        var info = stat()
        return stat(path, &info) == 0 && info.st_mode & S_IFMT == S_IFDIR
    }
}
