import DevtrustSystem
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
        let paths = CommandLine.arguments.dropFirst()
        guard !paths.isEmpty else {
            print("usage: \(CommandLine.arguments[0]) FILE|DIRECTORY...")
            exit(2)
        }
        var count = 0
        for path in paths {
            let files = DirectoryListing.names(path)?.filter { !$0.hasPrefix(".") }.map { path + "/" + $0 } ?? [path]
            for file in files {
                do {
                    check(try FileReader.read(file, limit: 1 << 24))
                } catch {
                    print(error)
                    exit(2)
                }
                count += 1
            }
        }
        print("replayed \(count) inputs")
    }
}
