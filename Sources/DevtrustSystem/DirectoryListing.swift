import Glibc

public enum DirectoryListing {
    /// The names in a directory (without `.` and `..`), sorted; nil when it cannot be read.
    public static func names(_ path: String) -> [String]? {
        guard let stream = opendir(path) else { return nil }
        defer { closedir(stream) }
        var names = [String]()
        while let entry = readdir(stream) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix(while: { $0 != 0 }), as: UTF8.self)
            }
            if name != "." && name != ".." { names.append(name) }
        }
        return names.sorted()
    }

    public static func isDirectory(_ path: String) -> Bool {
        var info = stat()
        return stat(path, &info) == 0 && info.st_mode & S_IFMT == S_IFDIR
    }
}
