@testable import DevtrustKeys
import Testing

/// A known TCTI's name is given to tctildr as its module's file name, which the
/// dynamic loader finds in its cache at once (the bare name it looks for in
/// every library directory first); the configuration after the name is kept.
@Suite struct TCTIModuleFileTests {
    @Test func aKnownNameBecomesItsModulesFileName() {
        #expect(TPMSelection.moduleFileConfiguration("swtpm:host=127.0.0.1,port=2321") == "libtss2-tcti-swtpm.so.0:host=127.0.0.1,port=2321")
        #expect(TPMSelection.moduleFileConfiguration("device:/dev/tpmrm0") == "libtss2-tcti-device.so.0:/dev/tpmrm0")
        #expect(TPMSelection.moduleFileConfiguration("tabrmd") == "libtss2-tcti-tabrmd.so.0")
        #expect(TPMSelection.moduleFileConfiguration("mssim:") == "libtss2-tcti-mssim.so.0:")
        #expect(TPMSelection.moduleFileConfiguration("device:a:b") == "libtss2-tcti-device.so.0:a:b")
    }

    @Test func anotherNameOrALibraryIsLeftToTctildr() {
        #expect(TPMSelection.moduleFileConfiguration("libtss2-tcti-swtpm.so.0:host=h") == nil)
        #expect(TPMSelection.moduleFileConfiguration("/opt/tcti/libmine.so:x") == nil)
        #expect(TPMSelection.moduleFileConfiguration("bogus:x") == nil)
        #expect(TPMSelection.moduleFileConfiguration("") == nil)
    }
}
