import DevtrustSystem
import DevtrustTestSupport
import Testing

@Suite struct DeviceModelTests {
    @Test func productNameThenVersionThenHostname() {
        let tree = TemporaryDirectory("root")
        tree.write("sys/class/dmi/id/product_name", "20XW0055GE\n")
        tree.write("sys/class/dmi/id/product_version", "ThinkPad X1 Carbon Gen 9\n")
        tree.write("etc/hostname", "kiosk-17\n")
        #expect(DeviceModel.detect(root: tree.path) == "20XW0055GE ThinkPad X1 Carbon Gen 9")

        let placeholder = TemporaryDirectory("root")
        placeholder.write("sys/class/dmi/id/product_name", "System Product Name\n")
        placeholder.write("etc/hostname", "kiosk-17\n")
        #expect(DeviceModel.detect(root: placeholder.path) == "kiosk-17")

        let plain = TemporaryDirectory("root")
        plain.write("sys/class/dmi/id/product_name", "Latitude 7440\n")
        plain.write("sys/class/dmi/id/product_version", "To Be Filled By O.E.M.\n")
        #expect(DeviceModel.detect(root: plain.path) == "Latitude 7440")

        let nothing = TemporaryDirectory("root")
        #expect(DeviceModel.detect(root: nothing.path) == nil)
        nothing.write("etc/hostname", "\u{1}\u{2}garbage\n")
        #expect(DeviceModel.detect(root: nothing.path) == nil)
        // On this machine: something, never empty.
        #expect(DeviceModel.detect()?.isEmpty == false)
    }

    @Test func fileReaderCapsAndReports() {
        let tree = TemporaryDirectory("files")
        let path = tree.write("big", [UInt8](repeating: 65, count: 2000))
        #expect(throws: FileReadError.self) { try FileReader.read(path, limit: 1000) }
        #expect((try? FileReader.read(path, limit: 2000))?.count == 2000)
        do {
            _ = try FileReader.read(tree.file("missing"))
        } catch {
            #expect(error.isMissing && error.description.contains("No such file"))
        }
    }
}
