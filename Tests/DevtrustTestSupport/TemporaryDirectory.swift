import Foundation

/// A fresh directory under $TMPDIR, removed when the value is released.
public final class TemporaryDirectory: @unchecked Sendable {
    public let path: String
    /// Every test directory's name starts with this, so that a test can tell
    /// the tests' own scratch (running in parallel) from what devtrust writes.
    public static let namePrefix = "devtrust-test."

    public init(_ label: String = "scratch") {
        var template = Array((NSTemporaryDirectory() + "/\(Self.namePrefix)\(label)-XXXXXX").utf8CString)
        let created = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
        precondition(created != nil, "mkdtemp failed")
        path = String(cString: template.withUnsafeBufferPointer { $0.baseAddress! })
        chmod(path, 0o700)
    }

    deinit {
        try? FileManager.default.removeItem(atPath: path)
    }

    public func file(_ name: String) -> String { path + "/" + name }

    @discardableResult
    public func write(_ name: String, _ contents: String, mode: Int = 0o600) -> String {
        write(name, Array(contents.utf8), mode: mode)
    }

    @discardableResult
    public func write(_ name: String, _ contents: [UInt8], mode: Int = 0o600) -> String {
        let target = file(name)
        try? FileManager.default.createDirectory(atPath: (target as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        _ = FileManager.default.createFile(atPath: target, contents: Data(contents), attributes: [.posixPermissions: mode])
        chmod(target, mode_t(mode))
        return target
    }

    public func read(_ name: String) -> [UInt8]? {
        FileManager.default.contents(atPath: file(name)).map { Array($0) }
    }

    public func entries(_ subdirectory: String = "") -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: subdirectory.isEmpty ? path : file(subdirectory))) ?? []).sorted()
    }
}

/// Copies a committed keystore fixture (keystore/fixtures/vN/NAME) into a fresh
/// private directory, with the modes git does not keep (0700 / 0600).
public func copyKeystoreFixture(_ relative: String, into directory: TemporaryDirectory, as name: String = "keystore") -> String {
    let source = Repository.path("keystore/fixtures/" + relative)
    let target = directory.file(name)
    mkdir(target, 0o700)
    var isDirectory: ObjCBool = false
    for entry in (try? FileManager.default.contentsOfDirectory(atPath: source)) ?? [] where entry != "expected.json" {
        guard FileManager.default.fileExists(atPath: source + "/" + entry, isDirectory: &isDirectory), !isDirectory.boolValue else { continue }
        let contents = FileManager.default.contents(atPath: source + "/" + entry) ?? Data()
        _ = FileManager.default.createFile(atPath: target + "/" + entry, contents: contents)
        chmod(target + "/" + entry, 0o600)
    }
    return target
}
