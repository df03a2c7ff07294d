enum CommandSpecs {
    static let version = "0.1.0"

    static let global: [OptionSpec] = [
        .value("keystore", "DIR", "keystore directory (env DEVTRUST_KEYSTORE; default ~/.local/share/devtrust, /var/lib/devtrust for root)"),
        .value("config", "FILE", "configuration file (env DEVTRUST_CONFIG; default ~/.config/devtrust/config.json, then /etc/devtrust/config.json)"),
        .value("tcti", "CONF", "TPM connection (env DEVTRUST_TCTI, TPM2TOOLS_TCTI, TSS2_TCTI; default device:/dev/tpmrm0, then tabrmd)"),
        .value("ca-file", "FILE", "trust this CA for HTTPS (env DEVTRUST_CA_FILE; default the system trust store)"),
        .flag("json", "print one JSON document on stdout instead of text"),
        .flag("verbose", short: "v", "say more on stderr"),
        .flag("quiet", short: "q", "say nothing on stderr but errors"),
        .flag("help", short: "h", "show help"),
        .flag("version", "show the version"),
    ]

    static let claimOption = OptionSpec.value("claim", "NAME=VALUE", repeatable: true, "add a string claim (repeatable)")

    static let commands: [CommandSpec] = [
        CommandSpec(name: "init", summary: "create the device key", positionalUsage: "", maximumPositionals: 0, options: [
            .value("backend", "auto|tpm|software", "where the key lives (default auto: the TPM when one answers)"),
            .flag("force", "replace an existing key (forgets the registrations made with it)"),
            .value("import", "FILE", "use this key file: a TSS2 PRIVATE KEY (tpm2-openssl) or a PKCS#8 P-256 PRIVATE KEY"),
        ]),
        CommandSpec(name: "pubkey", summary: "print the device's public key", positionalUsage: "", maximumPositionals: 0, options: [
            .value("format", "spki|pem|jwk|thumbprint", "spki (default): standard base64 DER SubjectPublicKeyInfo"),
        ]),
        CommandSpec(name: "sign-challenge", summary: "sign a base64url challenge (DER ECDSA-SHA256, standard base64)",
                    positionalUsage: "[CHALLENGE|-]", maximumPositionals: 1, options: []),
        CommandSpec(name: "device-data", summary: "print a deviceData JWT (ES256)", positionalUsage: "", maximumPositionals: 0,
                    options: [claimOption]),
        CommandSpec(name: "token", summary: "print a device token: an ES256 JWT with header deviceId", positionalUsage: "",
                    maximumPositionals: 0, options: [
                        .value("server", "URL|NAME", "use the registration with this server"),
                        .value("device-id", "ID", "use this device id instead of a registration's"),
                        claimOption,
                    ]),
        CommandSpec(name: "attributes", summary: "show the device attributes tokens carry (JSON)", positionalUsage: "",
                    maximumPositionals: 0, options: [.flag("explain", "show where each value came from, and why some are left out")]),
        CommandSpec(name: "verify", summary: "check an ES256 JWS or an ECDSA-SHA256 signature", positionalUsage: "",
                    maximumPositionals: 0, options: [
                        .value("public-key", "SPKI_B64|PEM_FILE", "the public key (as `devtrust pubkey` prints it, or a PEM file)"),
                        .value("jwt", "TOKEN|-", "the compact JWS to check (- reads stdin)"),
                        .value("signature", "SIG", "a signature in standard base64"),
                        .value("message", "FILE|-", "the signed bytes (with --signature)"),
                        .value("signature-format", "der|raw", "der (default) or raw 64-byte r||s"),
                        .value("max-age", "SECONDS", "also require jti and an iat at most this old"),
                    ]),
        CommandSpec(name: "register", summary: "register this device with a server (Flow Execution API)", positionalUsage: "",
                    maximumPositionals: 0, options: [
                        .value("server", "URL", "the server's base URL, e.g. https://api.asgardeo.io/t/acme"),
                        .value("flow-type", "TYPE", "REGISTRATION (default), INVITED_USER_REGISTRATION, ..."),
                        .value("application-id", "ID", "the application the flow belongs to"),
                        .value("input", "NAME=VALUE", repeatable: true, "a step input by its identifier (repeatable)"),
                        .value("inputs", "FILE|-", "a JSON object of string inputs (- reads stdin)"),
                        .flag("non-interactive", "never prompt: fail naming what is missing"),
                        .value("device-model", "TEXT", "the device's name at the server (default: DMI product name, else host name)"),
                        claimOption,
                        .flag("open", "open a redirection step's URL in the desktop's browser"),
                    ]),
        CommandSpec(name: "login", summary: "sign in: app-native with a device token, --browser or --device-code; stores the tokens", positionalUsage: "",
                    maximumPositionals: 0, options: [
                        .value("server", "URL", "a WSO2-style base URL ({URL}/oauth2/...)"),
                        .value("discovery", "URL", "an OpenID provider's discovery document (with --browser or --device-code)"),
                        .value("client-id", "ID", "the OAuth client id"),
                        .value("redirect-uri", "URI", "the client's registered redirect URI (default \(SignInSettings.defaultRedirectURI); "
                               + "with --browser \(BrowserLoginCommand.defaultRedirectURI) on a port the system chooses)"),
                        .value("scope", "SCOPES", "space-separated scopes (default openid)"),
                        .value("authenticator", "NAME", "pick this option of a multi-option step (name or id)"),
                        .value("input", "NAME=VALUE", repeatable: true, "an authenticator param by name (repeatable)"),
                        .value("inputs", "FILE|-", "a JSON object of string params"),
                        .flag("non-interactive", "never prompt"),
                        .flag("browser", "sign in in the browser: listen on 127.0.0.1 for its redirect (RFC 8252), open the URL with xdg-open"),
                        .flag("no-browser", "with --browser: print the URL instead of opening it"),
                        .value("timeout", "SECONDS", "with --browser: how long to wait for the browser (default \(BrowserLoginCommand.defaultTimeout))"),
                        .flag("par", "with --browser: push the request first (RFC 9126)"),
                        .flag("device-code", "RFC 8628: show a code to enter on another device, and poll"),
                        .flag("no-qr", "do not draw the QR code"),
                        .value("profile", "NAME", "a sign-in profile of the configuration"),
                        .value("callback", "URL", "finish an authorize-url sign-in with the URL the browser was sent back to"),
                    ]),
        CommandSpec(name: "access-token", summary: "print a valid access token of the stored sign-in (refreshing it first)", positionalUsage: "",
                    maximumPositionals: 0, options: [
                        .value("server", "URL|NAME", "the sign-in with this server"), .value("discovery", "URL", "the sign-in with this provider"),
                        .flag("refresh", "refresh first, whatever the expiry says (after a resource answered 401)"),
                    ]),
        CommandSpec(name: "authorize-url", summary: "print a browser sign-in URL with a device token and PKCE", positionalUsage: "",
                    maximumPositionals: 0, options: [
                        .value("server", "URL", "a WSO2-style base URL"), .value("discovery", "URL", "an OpenID provider's discovery document"),
                        .value("client-id", "ID", "the OAuth client id"), .value("redirect-uri", "URI", "the client's redirect URI"),
                        .value("scope", "SCOPES", "space-separated scopes (default openid)"),
                        .flag("par", "push the request first (RFC 9126)"), .value("profile", "NAME", "a sign-in profile of the configuration"),
                    ]),
        CommandSpec(name: "logout", summary: "revoke and delete the stored sign-in", positionalUsage: "", maximumPositionals: 0, options: [
            .value("server", "URL|NAME", "the sign-in with this server"), .value("discovery", "URL", "the sign-in with this provider"),
        ]),
        CommandSpec(name: "status", summary: "show the key, its backend and the registrations", positionalUsage: "",
                    maximumPositionals: 0, options: []),
        CommandSpec(name: "reset", summary: "delete the device key and the registrations", positionalUsage: "",
                    maximumPositionals: 0, options: [.flag("yes", "do not ask for confirmation")]),
        CommandSpec(name: "help", summary: "show help for a command", positionalUsage: "[COMMAND]", maximumPositionals: 1, options: []),
    ]

    static var parser: ArgumentParser { ArgumentParser(globalOptions: global, commands: commands) }

    static func overview() -> String {
        var text = """
        devtrust \(version): a device-trust agent. Keeps a P-256 device key (TPM or software),
        registers the device with an identity server, and mints device tokens.

        Usage: devtrust [OPTIONS] COMMAND [ARGS]

        Commands:

        """
        let width = commands.map(\.name.count).max() ?? 0
        for command in commands {
            text += "  " + command.name + String(repeating: " ", count: width - command.name.count + 2) + command.summary + "\n"
        }
        text += "\nOptions (before or after the command):\n" + describe(global)
        text += "\nExit codes: 0 ok, 1 failure/invalid, 2 usage, 3 no key or not registered, 4 server refused,\n"
        text += "5 network, 6 TPM, 7 keystore. `devtrust help COMMAND` shows a command's options; man devtrust.\n"
        return text
    }

    static func help(for name: String) -> String? {
        guard let command = commands.first(where: { $0.name == name }) else { return nil }
        var usage = "Usage: devtrust \(command.name)"
        for option in command.options {
            let shown = "--" + option.long + (option.valueName.map { " " + $0 } ?? "")
            usage += " [" + shown + "]" + (option.repeatable ? "..." : "")
        }
        if !command.positionalUsage.isEmpty { usage += " " + command.positionalUsage }
        var text = usage + "\n\n" + command.summary + "\n"
        if !command.options.isEmpty { text += "\nOptions:\n" + describe(command.options) }
        return text
    }

    private static func describe(_ options: [OptionSpec]) -> String {
        let rendered = options.map { option -> (String, String) in
            let short = option.short.map { "-\($0), " } ?? ""
            return (short + "--" + option.long + (option.valueName.map { " " + $0 } ?? ""), option.help)
        }
        let width = rendered.map(\.0.count).max() ?? 0
        return rendered.map { "  " + $0.0 + String(repeating: " ", count: width - $0.0.count + 2) + $0.1 + "\n" }.joined()
    }
}
