import DevtrustConfig
import DevtrustEncoding
import DevtrustTestSupport
import Testing

@Suite struct ConfigurationTests {
    @Test func parsesPlatformAndClaimsInOrder() throws {
        let configuration = try Configuration.parse(Array(#"{"platform":"linux-kiosk","claims":{"site":"berlin","floor":"3"}}"#.utf8), file: "/etc/devtrust/config.json")
        #expect(configuration.platform == "linux-kiosk")
        #expect(configuration.claims.map(\.name) == ["site", "floor"])
        #expect(configuration.claims.map(\.value) == ["berlin", "3"])
        #expect(try Configuration.parse(Array("{}".utf8), file: "f") == Configuration(source: "f"))
    }

    @Test(arguments: [
        (#"{"claims":{"lockScreen":true}}"#, "configuration file /c.json: field \"claims.lockScreen\" must be a string, found a boolean (true); see docs/configuration.md"),
        (#"{"claims":["a"]}"#, "configuration file /c.json: field \"claims\" must be an object, found an array; see docs/configuration.md"),
        (#"{"platform":7}"#, "configuration file /c.json: field \"platform\" must be a string, found a number (7); see docs/configuration.md"),
        (#"{"platform":""}"#, "configuration file /c.json: field \"platform\": must not be empty; see docs/configuration.md"),
        (#"{"claimz":{}}"#, "configuration file /c.json: unknown field \"claimz\" (known fields: platform, claims, http, inventory, collector, collectorTimeoutSeconds, postureCacheSeconds, signIn, browser); see docs/configuration.md"),
        (#"{"claims":{"jti":"x"}}"#, "configuration file /c.json: field \"claims.jti\": jti is set by devtrust on every token and cannot be overridden; see docs/configuration.md"),
        (#"{"claims":{"attestationToken":"x"}}"#, "attestationToken is for Play Integrity"),
        // A given claim only adds a name: never one devtrust measures or decides itself (docs/posture.md).
        (#"{"claims":{"diskEncryption":"true"}}"#, "configuration file /c.json: field \"claims.diskEncryption\": diskEncryption is measured by devtrust (`devtrust attributes --explain` shows how); a given value cannot replace a measured one; see docs/configuration.md"),
        (#"{"claims":{"lockScreen":"true"}}"#, "field \"claims.lockScreen\": lockScreen is measured by devtrust"),
        (#"{"claims":{"keyProtection":"tpm"}}"#, "field \"claims.keyProtection\": keyProtection is set by devtrust itself and cannot be given"),
        (#"{"claims":{"platform":"windows"}}"#, "field \"claims.platform\": platform is set by devtrust itself"),
        (#"{"claims":{"deviceId":"x"}}"#, "field \"claims.deviceId\": deviceId is set by devtrust itself"),
        ("[]", "configuration file /c.json: field \"(top level)\" must be an object, found an array; see docs/configuration.md"),
        (#"{"collector":["posture"]}"#, "field \"collector\": must start with the collector program's absolute path"),
        (#"{"collector":"/usr/lib/acme/posture"}"#, "field \"collector\" must be an array"),
        (#"{"inventory":"yes"}"#, "field \"inventory\" must be true or false"),
        (#"{"http":{"requestTimeoutSeconds":0}}"#, "field \"http.requestTimeoutSeconds\": must be 1 to 600 seconds"),
        (#"{"http":{"requestTimeoutSeconds":"30"}}"#, "field \"http.requestTimeoutSeconds\" must be an integer, found a string"),
        (#"{"platform":"linux",}"#, "configuration file /c.json is not valid JSON: expected a string key at byte 20"),
        (#"{"browser":{"extensionIds":["gmoaoppoddchekmljfbfbbcndbaiflmq"]}}"#,
         "field \"browser.extensionIds[0]\": must be a Chromium extension ID (32 letters a to p) or a Firefox add-on ID (name@domain, or {GUID})"),
        (#"{"browser":{"extensionIds":["chrome-extension://gmoaoppoddchekmljfbfbbcndbaiflmf/"]}}"#, "field \"browser.extensionIds[0]\": must be a Chromium"),
        (#"{"browser":{"extensionIds":[7]}}"#, "field \"browser.extensionIds[0]\" must be a string, found a number"),
        (#"{"browser":{"extensionIDs":[]}}"#, "unknown field \"browser.extensionIDs\""),
    ])
    func typedErrorsNameTheFieldAndFile(text: String, message: String) {
        do {
            let configuration = try Configuration.parse(Array(text.utf8), file: "/c.json")
            Issue.record("accepted \(text): \(configuration)")
        } catch {
            #expect(error.description.contains(message), "\(error.description)")
        }
    }

    /// An organisation's own builds of the extension: Chromium IDs (the key's hash, letters a to p)
    /// and Firefox add-on IDs, told apart by their form.
    @Test func browserExtensionIDsParseByTheirForm() throws {
        let text = #"{"browser":{"extensionIds":["abcdefghijklmnopabcdefghijklmnop","sso@acme.example","{12345678-9abc-def0-1234-56789abcdef0}"]}}"#
        let configuration = try Configuration.parse(Array(text.utf8), file: "f")
        #expect(configuration.browserExtensionIDs == [.chromium("abcdefghijklmnopabcdefghijklmnop"), .firefox("sso@acme.example"),
                                                      .firefox("{12345678-9abc-def0-1234-56789abcdef0}")])
        #expect(try Configuration.parse(Array("{}".utf8), file: "f").browserExtensionIDs.isEmpty)
        for refused in ["abcdefghijklmnopabcdefghijklmno", "ABCDEFGHIJKLMNOPABCDEFGHIJKLMNOP", "sso@", "a b@c", "{12345678-9abc-def0-1234-56789abcdef0",
                        "{1234567z-9abc-def0-1234-56789abcdef0}", String(repeating: "a", count: 70) + "@example.org", ""] {
            #expect(BrowserExtensionID(refused) == nil, "\(refused)")
        }
    }

    @Test func locationOrder() throws {
        let directory = TemporaryDirectory()
        let xdg = directory.write("xdg/devtrust/config.json", "{}")
        let system = directory.write("root/etc/devtrust/config.json", "{}")
        func location(_ explicit: String?, _ environment: [String: String]) -> String? {
            ConfigurationLoader(explicitPath: explicit, environment: environment, root: directory.file("root")).location()?.path
        }
        #expect(location("/explicit.json", ["DEVTRUST_CONFIG": "/env.json"]) == "/explicit.json")
        #expect(location(nil, ["DEVTRUST_CONFIG": "/env.json", "XDG_CONFIG_HOME": directory.file("xdg")]) == "/env.json")
        #expect(location(nil, ["XDG_CONFIG_HOME": directory.file("xdg")]) == xdg)
        #expect(location(nil, ["XDG_CONFIG_HOME": directory.file("nothing"), "HOME": directory.file("home")]) == system)
        #expect(location(nil, ["HOME": directory.file("root/etc")]) == system)
    }

    @Test func anExplicitFileMustExistADefaultOneNeedNot() throws {
        let directory = TemporaryDirectory()
        #expect(throws: ConfigError(file: directory.file("missing.json"), problem: .notFound)) {
            try ConfigurationLoader(explicitPath: directory.file("missing.json"), environment: [:], root: directory.path).load()
        }
        #expect(try ConfigurationLoader(explicitPath: nil, environment: ["HOME": directory.path], root: directory.path).load() == Configuration())
        let file = directory.write("c.json", #"{"claims":{"a":"b"}}"#)
        #expect(try ConfigurationLoader(explicitPath: nil, environment: ["DEVTRUST_CONFIG": file], root: directory.path).load().claims.first?.value == "b")
    }
}

@Suite struct SignInProfileTests {
    @Test func profilesParseWithTheirEndpoints() throws {
        let text = #"{"signIn":{"profiles":{"acme":{"server":"https://api.asgardeo.io/t/acme","clientId":"abc","scope":"openid profile","par":true,"endpoints":{"deviceAuthorization":"https://api.asgardeo.io/t/acme/oauth2/device_authorize"}}}}}"#
        let configuration = try Configuration.parse(Array(text.utf8), file: "/c.json")
        let profile = try #require(configuration.signInProfiles["acme"])
        #expect(profile.clientId == "abc" && profile.par == true && profile.scope == "openid profile")
        #expect(profile.endpoints == ["deviceAuthorization": "https://api.asgardeo.io/t/acme/oauth2/device_authorize"])
    }

    @Test(arguments: [
        (#"{"signIn":{"profiles":{"p":{"clientId":"x"}}}}"#, "missing required field \"signIn.profiles.p.server\""),
        (#"{"signIn":{"profiles":{"p":{"server":"https://s"}}}}"#, "missing required field \"signIn.profiles.p.clientId\""),
        (#"{"signIn":{"profiles":{"p":{"server":"https://s","clientId":"x","par":"yes"}}}}"#, "field \"signIn.profiles.p.par\" must be true or false"),
        (#"{"signIn":{"profiles":{"p":{"server":"https://s","clientId":"x","endpoints":{"device":"https://s/d"}}}}}"#, "unknown field \"signIn.profiles.p.endpoints.device\""),
        (#"{"signIn":{"profiles":{"p":{"server":"https://s","clientId":"x","endpoints":{"token":"ftp://s/t"}}}}}"#, "field \"signIn.profiles.p.endpoints.token\": must be an https:// URL"),
        (#"{"signIn":{"profile":{}}}"#, "unknown field \"signIn.profile\""),
    ])
    func profileErrorsNameTheField(text: String, message: String) {
        do {
            _ = try Configuration.parse(Array(text.utf8), file: "/c.json")
            Issue.record("accepted \(text)")
        } catch {
            #expect(error.description.contains(message), "\(error.description)")
        }
    }
}
