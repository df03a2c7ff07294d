import DevtrustSystem

/// `diskEncryption`: whether the file system mounted at `/` sits on dm-crypt
/// (LUKS1, LUKS2, plain), through any stack of device-mapper layers, found
/// from /proc/self/mountinfo and /sys/class/block/*/{dm/uuid,slaves}. No root,
/// no libcryptsetup. `false` only when every path down to the disks is known.
enum DiskEncryptionCollector {
    struct Mount {
        let majorMinor: String
        let mountPoint: String
        let fileSystem: String
        let source: String
    }

    static func collect(_ input: PostureInput) -> Attribute {
        guard let mounts = mounts(input) else {
            return .absent("diskEncryption", "/proc/self/mountinfo cannot be read")
        }
        guard let root = mounts.last(where: { $0.mountPoint == "/" }) else {
            return .absent("diskEncryption", "/proc/self/mountinfo has no mount at /")
        }
        var trail = ["/ is \(root.fileSystem) on \(root.source) (\(root.majorMinor))"]
        guard let device = deviceName(of: root, input) else {
            return .absent("diskEncryption", trail[0] + ": not a block device devtrust can follow (overlay, network or virtual file system)")
        }
        switch walk(device, input, mounts: mounts, depth: 0, trail: &trail) {
        case true?: return Attribute(name: "diskEncryption", value: "true", source: trail.joined(separator: "; "))
        case false?: return Attribute(name: "diskEncryption", value: "false", source: trail.joined(separator: "; "))
        case nil: return .absent("diskEncryption", trail.joined(separator: "; "))
        }
    }

    static func mounts(_ input: PostureInput) -> [Mount]? {
        guard let bytes = try? FileReader.read(input.path("/proc/self/mountinfo"), limit: 4 << 20) else { return nil }
        var mounts = [Mount]()
        for line in bytes.split(separator: UInt8(ascii: "\n")) {
            // ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPEROPTIONS
            let fields = line.split(separator: UInt8(ascii: " "))
            guard fields.count >= 10, let dash = fields.firstIndex(where: { $0.count == 1 && $0.first == UInt8(ascii: "-") }),
                  dash >= 6, dash + 2 < fields.count else { continue }
            mounts.append(Mount(majorMinor: String(decoding: fields[2], as: UTF8.self), mountPoint: unescape(fields[4]),
                                fileSystem: String(decoding: fields[dash + 1], as: UTF8.self), source: unescape(fields[dash + 2])))
        }
        return mounts
    }

    /// mountinfo writes space, tab, newline and backslash as \040 \011 \012 \134.
    static func unescape(_ field: ArraySlice<UInt8>) -> String {
        var result = [UInt8]()
        result.reserveCapacity(field.count)
        var index = field.startIndex
        while index < field.endIndex {
            if field[index] == UInt8(ascii: "\\"), index + 3 < field.endIndex, let value = octal(field[(index + 1)...(index + 3)]) {
                result.append(value)
                index += 4
            } else {
                result.append(field[index])
                index += 1
            }
        }
        return String(decoding: result, as: UTF8.self)
    }

    /// Three octal digits, up to \377.
    private static func octal(_ digits: ArraySlice<UInt8>) -> UInt8? {
        var value = 0
        for digit in digits {
            guard digit >= UInt8(ascii: "0"), digit <= UInt8(ascii: "7") else { return nil }
            value = value * 8 + Int(digit - UInt8(ascii: "0"))
        }
        return value <= 255 ? UInt8(value) : nil
    }

    /// The kernel's name of the block device behind a mount (dm-0, nvme0n1p3, loop0).
    static func deviceName(of mount: Mount, _ input: PostureInput) -> String? {
        let parts = mount.majorMinor.split(separator: ":")
        if parts.count == 2, parts[0] != "0",
           let uevent = try? FileReader.read(input.path("/sys/dev/block/\(mount.majorMinor)/uevent"), limit: 4096) {
            for line in String(decoding: uevent, as: UTF8.self).split(separator: "\n") where line.hasPrefix("DEVNAME=") {
                return String(line.dropFirst("DEVNAME=".count))
            }
        }
        // Btrfs and others report an anonymous device (0:N): go by the source.
        guard mount.source.hasPrefix("/dev/") else { return nil }
        let source = String(mount.source.dropFirst("/dev/".count))
        if source.hasPrefix("mapper/") {
            let mapped = String(source.dropFirst("mapper/".count))
            return DirectoryListing.names(input.path("/sys/class/block"))?.first { name in
                name.hasPrefix("dm-") && (try? FileReader.read(input.path("/sys/class/block/\(name)/dm/name"), limit: 256))
                    .map { String(decoding: $0, as: UTF8.self).trimmingWhitespace } == mapped
            }
        }
        return DirectoryListing.isDirectory(input.path("/sys/class/block/\(source)")) ? source : nil
    }

    /// true: dm-crypt below; false: every path ends on a plain disk; nil: cannot tell.
    static func walk(_ name: String, _ input: PostureInput, mounts: [Mount], depth: Int, trail: inout [String]) -> Bool? {
        guard depth < 16 else { trail.append("device stack deeper than 16 levels"); return nil }
        let base = "/sys/class/block/\(name)"
        guard DirectoryListing.isDirectory(input.path(base)) else {
            trail.append("\(base) does not exist")
            return nil
        }
        if let uuid = try? FileReader.read(input.path(base + "/dm/uuid"), limit: 512) {
            let text = String(decoding: uuid, as: UTF8.self).trimmingWhitespace
            let kind = text.split(separator: "-").first.map(String.init) ?? "?"
            if text.hasPrefix("CRYPT-") {
                trail.append("\(name) is dm-crypt (\(text.split(separator: "-").prefix(2).joined(separator: "-")))")
                return true
            }
            trail.append("\(name) is device-mapper \(kind.isEmpty ? "(no uuid)" : kind)")
        }
        let slaves = DirectoryListing.names(input.path(base + "/slaves")) ?? []
        if !slaves.isEmpty {
            trail.append("\(name) sits on \(slaves.joined(separator: ", "))")
            var results = [Bool?]()
            for slave in slaves { results.append(walk(slave, input, mounts: mounts, depth: depth + 1, trail: &trail)) }
            if results.contains(true) { return true }
            return results.contains(where: { $0 == nil }) ? nil : false
        }
        if name.hasPrefix("dm-") {
            trail.append("\(name) is device-mapper with no underlying devices listed")
            return nil
        }
        if name.hasPrefix("loop") {
            guard let backing = try? FileReader.read(input.path(base + "/loop/backing_file"), limit: 4096) else {
                trail.append("\(name) is a loop device with no backing file")
                return nil
            }
            let file = String(decoding: backing, as: UTF8.self).trimmingWhitespace
            guard let holder = mounts.filter({ file == $0.mountPoint || file.hasPrefix($0.mountPoint == "/" ? "/" : $0.mountPoint + "/") })
                .max(by: { $0.mountPoint.count < $1.mountPoint.count }), let device = deviceName(of: holder, input) else {
                trail.append("\(name) is a loop device on \(file), whose disk cannot be followed")
                return nil
            }
            trail.append("\(name) is a loop device on \(file), in \(holder.mountPoint) on \(device)")
            return walk(device, input, mounts: mounts, depth: depth + 1, trail: &trail)
        }
        trail.append("\(name) is a disk or partition without encryption")
        return false
    }
}
