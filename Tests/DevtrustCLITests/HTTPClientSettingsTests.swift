import DevtrustConfig
@testable import DevtrustCLI
import Testing

/// What every command's HTTP client is set up with, from the flag, the configuration and the environment.
@Suite struct HTTPClientSettingsTests {
    @Test func theFlagWinsOverTheEnvironmentAndAnEmptyCAFileMeansTheSystemStore() {
        let environment = ["DEVTRUST_CA_FILE": "/env/ca.pem"]
        #expect(HTTPClientSettings(caFile: "/flag/ca.pem", http: .init(), environment: environment).options.caFile == "/flag/ca.pem")
        #expect(HTTPClientSettings(caFile: nil, http: .init(), environment: environment).options.caFile == "/env/ca.pem")
        #expect(HTTPClientSettings(caFile: "", http: .init(), environment: environment).options.caFile == nil)
        #expect(HTTPClientSettings(caFile: nil, http: .init(), environment: ["DEVTRUST_CA_FILE": ""]).options.caFile == nil)
    }

    @Test func timeoutsComeFromTheConfigurationAndDebugAndNoProxyFromTheEnvironment() {
        var http = Configuration.HTTPSettings()
        http.connectTimeoutSeconds = 3
        http.requestTimeoutSeconds = 7
        let options = HTTPClientSettings(caFile: nil, http: http, environment: ["DEVTRUST_HTTP_DEBUG": "1", "no_proxy": "lower", "NO_PROXY": "upper"]).options
        #expect(options.connectTimeoutMilliseconds == 3000 && options.totalTimeoutMilliseconds == 7000)
        #expect(options.debug && options.noProxy == "lower" && options.userAgent == "devtrust/\(CommandSpecs.version)")
        for off in ["", "0"] {
            #expect(!HTTPClientSettings(caFile: nil, http: http, environment: ["DEVTRUST_HTTP_DEBUG": off]).options.debug)
        }
        #expect(HTTPClientSettings(caFile: nil, http: http, environment: ["NO_PROXY": "upper"]).options.noProxy == "upper")
    }
}
