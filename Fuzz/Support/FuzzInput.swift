import Glibc

/// What every fuzz target shares: the input as bytes, and, in normal builds,
/// a replayer that runs files through the same check (the tests replay the
/// corpora and every saved crash input this way).
public enum FuzzInput {
    public static func bytes(_ data: UnsafePointer<UInt8>?, _ size: Int) -> [UInt8] {
        guard let data, size > 0 else { return [] }
        return Array(UnsafeBufferPointer(start: data, count: size))
    }

    /// `TARGET FILE|DIRECTORY...`: runs each file through `check`; prints how many.
    public static func replay(_ check: ([UInt8]) -> Void) {
        var count = 0
        for path in CommandLine.arguments.dropFirst() {
            for file in files(at: path) {
                guard let input = read(file) else {
                    print("cannot read \(file)")
                    exit(2)
                }
                check(input)
                count += 1
            }
        }
        print("replayed \(count) inputs")
    }

    static func files(at path: String) -> [String] {
        guard let directory = opendir(path) else { return [path] }
        defer { closedir(directory) }
        var names = [String]()
        while let entry = readdir(directory) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix(while: { $0 != 0 }), as: UTF8.self) }
            if !name.hasPrefix(".") { names.append(path + "/" + name) }
        }
        return names.sorted()
    }

    static func read(_ path: String) -> [UInt8]? {
        guard let file = fopen(path, "rb") else { return nil }
        defer { fclose(file) }
        var bytes = [UInt8]()
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while true {
            let got = fread(&buffer, 1, buffer.count, file)
            if got == 0 { break }
            bytes += buffer.prefix(got)
        }
        return ferror(file) == 0 ? bytes : nil
    }
}
