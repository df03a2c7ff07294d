// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "devtrust",
    products: [
        .executable(name: "devtrust", targets: ["devtrust"]),
        .library(name: "DevtrustCLI", targets: ["DevtrustCLI"]),
    ],
    targets: [
        .systemLibrary(
            name: "COpenSSL",
            providers: [.apt(["libssl-dev"])]
        ),

        // tpm2-tss through dlopen (libtss2-dev for the headers), loaded only
        // by the commands that use the TPM.
        .target(name: "CTPM2", linkerSettings: [.linkedLibrary("dl")]),

        // libcurl through dlopen, with typed wrappers for its variadic calls.
        .target(name: "CCurl", linkerSettings: [.linkedLibrary("dl")]),

        // prctl/setrlimit (variadic or macro-laden in C): no core dumps, no same-user ptrace;
        // ioctl (variadic): the terminal's window size.
        .target(name: "CProcessHardening"),

        // Unix stream sockets for the system agent and its clients (fcntl is variadic, struct ucred needs
        // _GNU_SOURCE, sockaddr_un a fixed array): listen, connect with a timeout, accept, the peer's
        // credentials (SO_PEERCRED), socket activation's descriptor, and the termination pipe (a signal
        // handler). On the token path: libc only.
        .target(name: "CAgentSocket"),

        // The signing deadline's alarm: a SIGALRM handler that writes words made beforehand and exits
        // (async-signal-safe C; Swift cannot write a signal handler). On the token path.
        .target(name: "CDeadline"),

        // The file-system uid and gid of a thread (setfsuid, setfsgid: not in Swift's Glibc): the
        // system agent reads a client's desktop settings as that client. On the token path: libc only.
        .target(name: "CFileSystemIdentity"),

        // Who owns the other end of a loopback TCP connection (NETLINK_SOCK_DIAG, else /proc/net/tcp):
        // the browser sign-in's listener serves the user's own processes only.
        .target(name: "CLoopbackPeer"),

        // libqrencode through dlopen, for the device-code QR code.
        .target(name: "CQRCode", linkerSettings: [.linkedLibrary("dl")]),

        // Base64, base64url, hex, DER and PEM, and a small strict JSON value type.
        .target(name: "DevtrustEncoding", dependencies: ["DevtrustErrors"]),

        // URLs as RFC 3986 splits and resolves them (URLReference), and the one rule for a URL's
        // origin (Origin): what every module compares servers by. On the token path: no HTTP here.
        .target(name: "DevtrustURL"),

        // What every library error says it is (ClassifiedError): its category (usage, not registered,
        // server refused, network, TPM, keystore, failure), its summary and its hint, as values; the
        // exit codes, the native host's and the event stream's error codes derive from the category.
        // No dependencies, on the token path.
        .target(name: "DevtrustErrors"),

        // Operating-system helpers shared by the modules: bounded file reads.
        .target(name: "DevtrustSystem", dependencies: ["CFileSystemIdentity", "DevtrustEncoding", "DevtrustErrors"]),

        // The device key: one DeviceKey protocol, backends in parallel files,
        // P-256 public keys, ECDSA signature encodings, SHA-256, randomness, the clock.
        .target(name: "DevtrustKeys", dependencies: ["COpenSSL", "CTPM2", "DevtrustEncoding", "DevtrustErrors"]),

        // Compact JWS (ES256), verification, device data and device tokens.
        .target(name: "DevtrustJOSE", dependencies: ["DevtrustKeys", "DevtrustEncoding", "DevtrustErrors", "DevtrustURL"]),

        // The on-disk keystore: layout, atomic writes, locking, permissions, versions;
        // the records it holds, a sign-in's tokens (TokenSet) among them.
        .target(name: "DevtrustKeystore", dependencies: ["DevtrustKeys", "DevtrustEncoding", "DevtrustErrors", "DevtrustSystem", "DevtrustURL"]),

        // The JSON configuration file and its typed errors.
        .target(name: "DevtrustConfig", dependencies: ["DevtrustEncoding", "DevtrustErrors", "DevtrustSystem"]),

        // HTTPS (and http to loopback) over libcurl: the one HTTP layer of every client.
        .target(name: "DevtrustHTTP", dependencies: ["CCurl", "DevtrustEncoding", "DevtrustErrors", "DevtrustURL"]),

        // The Flow Execution API client: registration flows and the Device Registration step.
        .target(name: "DevtrustFlow", dependencies: ["DevtrustAgent", "DevtrustHTTP", "DevtrustJOSE", "DevtrustKeys", "DevtrustEncoding", "DevtrustErrors"]),

        // Signing in from the device: OIDC discovery, PKCE, app-native sign-in, device code, tokens.
        .target(name: "DevtrustSignIn", dependencies: ["CLoopbackPeer", "DevtrustHTTP", "DevtrustJOSE", "DevtrustKeys", "DevtrustKeystore", "DevtrustEncoding", "DevtrustErrors",
                                                       "DevtrustURL"]),

        // Linux device posture: attribute collectors reading below a root prefix.
        .target(name: "DevtrustPosture", dependencies: ["DevtrustSystem", "DevtrustEncoding"]),

        // The device's identity: its key in the keystore (any backend), its registrations
        // and stored sign-ins. Below HTTP, like everything `devtrust token` runs on
        // (scripts/check-layers.py): the caller refreshes a sign-in's tokens and says
        // how it went (RefreshOutcome).
        .target(name: "DevtrustDevice", dependencies: ["DevtrustKeys", "DevtrustKeystore", "DevtrustEncoding", "DevtrustErrors", "DevtrustURL"]),

        // The application core every front end shares (below HTTP, on the token path): device tokens
        // and device data for a chosen registration (DeviceTokenService), the servers' clocks
        // (ServerClocks), the device's attributes, and the one signing deadline (SigningDeadline).
        .target(name: "DevtrustCore", dependencies: ["CDeadline", "DevtrustConfig", "DevtrustDevice", "DevtrustErrors", "DevtrustJOSE", "DevtrustKeys",
                                                     "DevtrustKeystore", "DevtrustPosture", "DevtrustSystem", "DevtrustURL"]),

        // The system agent (`devtrust agent`) and its client, below HTTP and on the token path (`token` goes
        // through it): the bounded wire protocol over a Unix stream socket (AgentWire, AgentRequest, AgentReply),
        // the server's loop (AgentServer: clients known by SO_PEERCRED only, every connection bounded in size and
        // time), the operations over the machine keystore with the one device-token service (AgentService), the
        // socket it listens on (AgentListener: its own, or systemd's), and the client (AgentClient).
        .target(name: "DevtrustAgent", dependencies: ["CAgentSocket", "DevtrustConfig", "DevtrustCore", "DevtrustDevice", "DevtrustEncoding",
                                                      "DevtrustErrors", "DevtrustJOSE", "DevtrustKeys", "DevtrustKeystore", "DevtrustSystem", "DevtrustURL"]),

        // The device's sign-ins as every front end runs them (above HTTP, beside the protocol's library
        // DevtrustSignIn): where and as whom a sign-in goes, from options, a sign-in profile and discovery
        // (SignInTarget, ServerBaseURL); the device key as DPoP key and its proofs (DPoPKey); a sign-in saved,
        // refreshed when due (SignInRefresh, RefreshOutcome.of) and revoked (SignInRevocation); the browser's
        // authorization request; the servers' clocks read from every answer (ServerClocks.watch).
        .target(name: "DevtrustSignInService", dependencies: ["DevtrustConfig", "DevtrustCore", "DevtrustDevice", "DevtrustEncoding",
                                                              "DevtrustErrors", "DevtrustHTTP", "DevtrustJOSE", "DevtrustKeys", "DevtrustKeystore",
                                                              "DevtrustSignIn", "DevtrustURL"]),

        // The terminal toolkit: the process's standard streams (Terminal), text made safe to show
        // (TerminalText), colour, a command's lines for people, the status line and the network-wait
        // indicator, the device-code screen, prompts and a step's dialog, an error in words. No HTTP.
        .target(name: "DevtrustTerminal", dependencies: ["CProcessHardening", "CQRCode", "DevtrustEncoding", "DevtrustErrors"]),

        // The browsers' side of sign-in: the native messaging host (NativeHost: the endpoints it serves a
        // device token for, from the registrations and the sign-in profiles), taking the core's device-token
        // service and the configuration (NativeHostServices), not the command line; its manifests and their
        // installation.
        .target(name: "DevtrustBrowser", dependencies: ["DevtrustConfig", "DevtrustCore", "DevtrustDevice", "DevtrustEncoding", "DevtrustErrors",
                                                        "DevtrustHTTP", "DevtrustJOSE", "DevtrustKeys", "DevtrustKeystore", "DevtrustSignIn",
                                                        "DevtrustSystem", "DevtrustTerminal", "DevtrustURL"]),

        // `doctor`'s checks and probes: the configuration, the keystore, the key, the TPM, the libraries,
        // the CA file and the servers' clocks, each a DoctorCheck that the front end renders; work that
        // may never end runs in a child process with a deadline (BoundedProbes), as `status`'s KeyHealth.
        .target(name: "DevtrustDoctor", dependencies: ["CQRCode", "DevtrustConfig", "DevtrustCore", "DevtrustDevice", "DevtrustEncoding",
                                                       "DevtrustErrors", "DevtrustHTTP", "DevtrustKeys", "DevtrustKeystore", "DevtrustSignInService",
                                                       "DevtrustSystem", "DevtrustTerminal", "DevtrustURL"]),

        // The command line: argument parsing, commands, errors rendered (message, --json, exit code).
        .target(
            name: "DevtrustCLI",
            dependencies: ["CProcessHardening", "DevtrustAgent", "DevtrustBrowser", "DevtrustCore", "DevtrustDoctor", "DevtrustDevice", "DevtrustFlow", "DevtrustHTTP", "DevtrustPosture", "DevtrustSignIn", "DevtrustKeys", "DevtrustJOSE", "DevtrustKeystore", "DevtrustConfig", "DevtrustEncoding", "DevtrustErrors", "DevtrustSignInService", "DevtrustSystem", "DevtrustTerminal", "DevtrustURL"]
        ),
        // Every symbol bound at start (-z now): the first call of a lazily bound
        // function runs the dynamic linker's resolver, which saves the vector
        // registers on the stack, where they may hold key bytes just copied
        // (KeyMemoryTests). Full RELRO comes with it.
        .executableTarget(name: "devtrust", dependencies: ["DevtrustCLI", "CProcessHardening"],
                          linkerSettings: [.unsafeFlags(["-Xlinker", "-z", "-Xlinker", "now"])]),
        // In-process measurements for `make bench` (not installed).
        .executableTarget(name: "devtrust-bench", dependencies: ["DevtrustPosture", "DevtrustJOSE", "DevtrustKeys", "DevtrustEncoding", "DevtrustSystem"]),

        // libFuzzer targets (`make fuzz`, Fuzz/README.md): each holds one
        // LLVMFuzzerTestOneInput. Built without -DFUZZING, each is a replayer
        // (`FuzzX FILE|DIR...`), which the tests run over the corpora and every
        // saved crash input.
        .target(name: "FuzzSupport", dependencies: ["DevtrustSystem"], path: "Fuzz/Support"),
        .executableTarget(name: "FuzzFlowResponse", dependencies: ["DevtrustFlow", "FuzzSupport"], path: "Fuzz/FlowResponse"),
        .executableTarget(name: "FuzzAppNativeResponse", dependencies: ["DevtrustSignIn", "DevtrustHTTP", "FuzzSupport"], path: "Fuzz/AppNativeResponse"),
        .executableTarget(name: "FuzzDERSignature", dependencies: ["DevtrustKeys", "FuzzSupport"], path: "Fuzz/DERSignature"),
        .executableTarget(name: "FuzzCompactJWS", dependencies: ["DevtrustJOSE", "DevtrustKeys", "DevtrustEncoding", "FuzzSupport"], path: "Fuzz/CompactJWS"),
        .executableTarget(name: "FuzzTSS2KeyFile", dependencies: ["DevtrustKeys", "FuzzSupport"], path: "Fuzz/TSS2KeyFile"),
        .executableTarget(name: "FuzzConfiguration", dependencies: ["DevtrustConfig", "FuzzSupport"], path: "Fuzz/Configuration"),
        .executableTarget(name: "FuzzKeystore", dependencies: ["DevtrustKeystore", "FuzzSupport"], path: "Fuzz/Keystore"),
        .executableTarget(name: "FuzzPrivateKeyFile", dependencies: ["DevtrustKeys", "FuzzSupport"], path: "Fuzz/PrivateKeyFile"),
        .executableTarget(name: "FuzzLoopbackRequest", dependencies: ["DevtrustSignIn", "FuzzSupport"], path: "Fuzz/LoopbackRequest"),

        // Shared test environment: temporary keystores and the devices set up in
        // them, the built binary, fixed clocks and randomness, independent
        // verifiers (openssl CLI, python3-cryptography, jose); for the fast tier,
        // virtual time and an in-process identity server (FakeIdentityServer).
        .target(name: "DevtrustTestSupport", dependencies: ["DevtrustEncoding", "DevtrustHTTP", "DevtrustJOSE", "DevtrustKeys", "DevtrustSignIn"],
                path: "Tests/DevtrustTestSupport"),

        .testTarget(name: "DevtrustEncodingTests", dependencies: ["DevtrustEncoding", "DevtrustTestSupport"]),
        .testTarget(name: "DevtrustURLTests", dependencies: ["DevtrustURL", "DevtrustEncoding", "DevtrustTestSupport"]),
        .testTarget(
            name: "DevtrustKeysTests",
            dependencies: ["COpenSSL", "DevtrustKeys", "DevtrustEncoding", "DevtrustTestSupport"],
            exclude: ["Vectors"]
        ),
        .testTarget(
            name: "DevtrustJOSETests",
            dependencies: ["DevtrustJOSE", "DevtrustKeys", "DevtrustEncoding", "DevtrustTestSupport"]
        ),
        .testTarget(
            name: "DevtrustKeystoreTests",
            dependencies: ["DevtrustKeystore", "DevtrustKeys", "DevtrustEncoding", "DevtrustTestSupport"]
        ),
        .testTarget(
            name: "DevtrustDeviceTests",
            dependencies: ["DevtrustDevice", "DevtrustKeystore", "DevtrustKeys", "DevtrustJOSE", "DevtrustEncoding", "DevtrustTestSupport"]
        ),
        .testTarget(
            name: "DevtrustCoreTests",
            dependencies: ["CDeadline", "DevtrustCore", "DevtrustConfig", "DevtrustDevice", "DevtrustEncoding", "DevtrustJOSE", "DevtrustKeys", "DevtrustKeystore",
                           "DevtrustPosture", "DevtrustTestSupport"]
        ),
        .testTarget(
            name: "DevtrustFlowTests",
            dependencies: ["DevtrustFlow", "DevtrustHTTP", "DevtrustJOSE", "DevtrustKeys", "DevtrustEncoding", "DevtrustTestSupport"]
        ),
        .testTarget(
            name: "DevtrustPostureTests",
            dependencies: ["DevtrustPosture", "DevtrustEncoding", "DevtrustSystem", "DevtrustTestSupport"],
            exclude: ["Fixtures"]
        ),
        .testTarget(name: "DevtrustHTTPTests", dependencies: ["CCurl", "DevtrustHTTP", "DevtrustEncoding", "DevtrustTestSupport"]),
        .testTarget(name: "DevtrustSignInTests", dependencies: ["DevtrustSignIn", "DevtrustHTTP", "DevtrustKeystore", "DevtrustEncoding"]),
        .testTarget(name: "DevtrustAgentTests", dependencies: ["DevtrustAgent", "DevtrustConfig", "DevtrustDevice", "DevtrustEncoding", "DevtrustErrors", "DevtrustKeys",
                                                            "DevtrustKeystore", "DevtrustTestSupport"]),
        .testTarget(name: "DevtrustSystemTests", dependencies: ["DevtrustSystem", "DevtrustTestSupport"]),
        .testTarget(name: "DevtrustConfigTests", dependencies: ["DevtrustConfig", "DevtrustEncoding", "DevtrustTestSupport"]),
        .testTarget(
            name: "DevtrustCLITests",
            dependencies: ["DevtrustAgent", "DevtrustBrowser", "DevtrustCLI", "DevtrustDoctor", "DevtrustTestSupport", "DevtrustEncoding", "DevtrustJOSE", "DevtrustKeys", "DevtrustConfig",
                           "DevtrustCore", "DevtrustDevice", "DevtrustErrors", "DevtrustFlow", "DevtrustHTTP", "DevtrustKeystore", "DevtrustSignIn",
                           "DevtrustSignInService", "DevtrustSystem", "DevtrustTerminal", "DevtrustURL"]
        ),
    ]
)

// Every Swift module of devtrust itself (not the C shims, the tests or the bench):
// - no implicit import of Swift's regex library or of Concurrency: devtrust uses
//   neither, and not linking them keeps ~1.2 MB of code out of the binary;
// - whole-program specialisation across modules in release builds (generic
//   collection code from DevtrustEncoding runs specialised in DevtrustJOSE);
// - each function in a section of its own in release builds, so that the
//   linker's ordering file (scripts/link-order.txt) places the functions a
//   token runs together, not the whole files they are in. (The compiler does
//   not generate code again for a module whose IR has not changed: objects
//   built before this flag keep one section until they are removed.)
for target in package.targets where target.path == nil && target.type != .test && target.type != .system
    && !target.name.hasPrefix("C") && target.name != "devtrust-bench" {
    target.swiftSettings = (target.swiftSettings ?? []) + [
        .unsafeFlags(["-Xfrontend", "-disable-implicit-string-processing-module-import",
                      "-Xfrontend", "-disable-implicit-concurrency-module-import"]),
        .unsafeFlags(["-cross-module-optimization", "-Xfrontend", "-function-sections"], .when(configuration: .release)),
    ]
}
