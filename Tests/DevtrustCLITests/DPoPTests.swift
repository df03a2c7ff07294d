import DevtrustEncoding
import DevtrustTestSupport
import Foundation
import Testing

/// What DPoP tests share: the independent proof checker, the curl recipe of docs/sign-in.md, dpop.py.
enum DPoPCheck {
    /// A software device key in `directory`/ks, with no TPM to find.
    static func softwareKey(_ directory: TemporaryDirectory) throws -> DevtrustBinary {
        var cli = DevtrustBinary(keystore: directory.file("ks"))
        cli.extraEnvironment["DEVTRUST_TCTI"] = "device:/nonexistent"
        try cli.run("init", "--backend", "software", "-q")
        return cli
    }

    /// Tests/Interop/check_dpop_proof.py (jwcrypto and PyJWT): the proof's jkt, header and claims, or a failed expectation.
    static func verify(_ proof: String, method: String, url: String, accessToken: String? = nil, nonce: String? = nil,
                       jkt: String? = nil) throws -> JSONObject? {
        var arguments = [Repository.path("Tests/Interop/check_dpop_proof.py"), proof, method, url]
        // --name=VALUE: a value may start with "-".
        if let accessToken { arguments.append("--access-token=" + accessToken) }
        if let nonce { arguments.append("--nonce=" + nonce) }
        if let jkt { arguments.append("--jkt=" + jkt) }
        let result = try ProcessRunner.run(ExternalTool.python.rawValue, arguments)
        #expect(result.status == 0, "the proof does not check out independently: \(result.stderr)")
        return try? JSONParser.parse(result.stdout).objectValue
    }

    /// A proof made outside devtrust (python3-cryptography): of a new key of its own ("foreign.pem" in
    /// `directory`), or of the key in `keyFile` (a software device key's PKCS#8 file).
    static func foreignProof(_ directory: TemporaryDirectory, method: String, url: String, accessToken: String? = nil, nonce: String? = nil,
                             keyFile: String? = nil) throws -> String {
        let key = keyFile ?? directory.file("foreign.pem")
        if keyFile == nil && !FileManager.default.fileExists(atPath: key) {
            let made = try ExternalTool.openssl.run(["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", key])
            #expect(made.status == 0)
        }
        let script = """
        import base64, hashlib, json, sys, time, uuid
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature
        b = lambda d: base64.urlsafe_b64encode(d).rstrip(b"=").decode()
        key = serialization.load_pem_private_key(open(sys.argv[1], "rb").read(), None)
        n = key.public_key().public_numbers()
        header = {"typ": "dpop+jwt", "alg": "ES256", "jwk": {"kty": "EC", "crv": "P-256", "x": b(n.x.to_bytes(32, "big")), "y": b(n.y.to_bytes(32, "big"))}}
        claims = {"jti": str(uuid.uuid4()), "htm": sys.argv[2], "htu": sys.argv[3], "iat": int(time.time())}
        if sys.argv[4]: claims["ath"] = b(hashlib.sha256(sys.argv[4].encode()).digest())
        if sys.argv[5]: claims["nonce"] = sys.argv[5]
        data = b(json.dumps(header).encode()) + "." + b(json.dumps(claims).encode())
        r, s = decode_dss_signature(key.sign(data.encode(), ec.ECDSA(hashes.SHA256())))
        print(data + "." + b(r.to_bytes(32, "big") + s.to_bytes(32, "big")))
        """
        let result = try ProcessRunner.run(ExternalTool.python.rawValue, ["-c", script, key, method, url, accessToken ?? "", nonce ?? ""])
        #expect(result.status == 0, "\(result.stderr)")
        return result.output
    }

    /// The `<!-- dpop-recipe -->` block of docs/sign-in.md, without its URL= line: the commands a user copies.
    static func recipe() throws -> String {
        let text = String(decoding: try #require(FileManager.default.contents(atPath: Repository.path("docs/sign-in.md"))), as: UTF8.self)
        let after = try #require(text.components(separatedBy: "<!-- dpop-recipe -->\n```sh\n").dropFirst().first)
        let block = try #require(after.components(separatedBy: "\n```").first)
        return block.split(separator: "\n", omittingEmptySubsequences: false).filter { !$0.hasPrefix("URL=") }.joined(separator: "\n")
    }

    /// Runs the recipe with bash, devtrust on PATH, for `url`: curl's `-i` answer (status line, headers, body).
    static func runRecipe(_ cli: DevtrustBinary, url: String) throws -> ProcessResult {
        let bin = TemporaryDirectory("bin")
        try FileManager.default.createSymbolicLink(atPath: bin.file("devtrust"), withDestinationPath: cli.path)
        var environment = cli.environment
        environment["PATH"] = bin.path + ":/usr/bin:/bin"
        environment["URL"] = url
        // -i: the answer's status and headers as well as its body.
        let recipe = try recipe()
        #expect(recipe.contains("\ndpop_curl GET \"$URL\""), "the recipe no longer ends with its example call: \(recipe)")
        let script = recipe.replacingOccurrences(of: "\ndpop_curl GET \"$URL\"", with: "\ndpop_curl GET \"$URL\" -i")
        return try ProcessRunner.run("/bin/bash", ["--noprofile", "--norc", "-c", "set -e\n" + script], environment: environment)
    }

    static func storedTokens(_ directory: TemporaryDirectory) throws -> JSONObject {
        let file = try #require(directory.entries("ks").first { $0.hasPrefix("signin-") })
        return try JSONParser.parse(try #require(directory.read("ks/" + file))).objectValue!
    }

    /// The nonce devtrust keeps for the (only) server in its cache directory.
    static func cachedNonce(_ cli: DevtrustBinary) throws -> String {
        let bytes = try #require(FileManager.default.contents(atPath: cli.cacheDirectory + "/dpop-nonces.json"))
        let nonces = try JSONParser.parse(Array(bytes)).objectValue
        return try #require(nonces?.members.first?.value.stringValue)
    }

    static func fingerprint(_ cli: DevtrustBinary) throws -> String {
        try cli.run("pubkey", "--format", "thumbprint").output
    }

    /// curl -s -w "%{http_code}" with the given headers and form: the status code and body.
    static func curl(_ url: String, form: [String] = [], headers: [String] = []) throws -> (status: String, body: String) {
        var arguments = ["-s", "-w", "\n%{http_code}"]
        for header in headers { arguments += ["-H", header] }
        for field in form { arguments += ["--data-urlencode", field] }
        let result = try ProcessRunner.run("/usr/bin/curl", arguments + [url])
        let lines = result.stdout.split(separator: "\n", omittingEmptySubsequences: false)
        return (String(lines.last ?? ""), lines.dropLast().joined(separator: "\n"))
    }
}

/// DPoP against glewlwyd's `oidc-dpop` plugin: DPoP allowed, nonces mandatory (a nonce serves 4
/// proofs, then rotates). glewlwyd checks the key at the token endpoint, not at userinfo.
@Suite(.enabled(if: GlewlwydPeer.shouldRun)) struct DPoPGlewlwydTests {
    @Test func tokensAreBoundToTheDeviceKeyAndRefreshProvesIt() throws {
        let peer = try GlewlwydPeer()
        let directory = TemporaryDirectory()
        let cli = try DPoPCheck.softwareKey(directory)
        let jkt = try DPoPCheck.fingerprint(cli)
        // No --dpop: the discovery document lists ES256 in dpop_signing_alg_values_supported.
        let login = try RunningCommand(cli, ["login", "--device-code", "--discovery", peer.dpopDiscovery, "--client-id", peer.clientID,
                                             "--scope", "openid offline_access", "--json"])
        let started = try #require(login.nextLine().flatMap { try? JSONParser.parse($0).objectValue })
        let userCode = try #require(started["user_code"]?.stringValue)
        #expect(try peer.approve(userCode, plugin: "oidc-dpop").status == 0)
        let (status, lines, stderr) = login.finish()
        #expect(status == 0, "\(stderr)")
        let success = lines.compactMap { try? JSONParser.parse($0).objectValue }.last
        #expect(success?["token_type"] == .string("DPoP"), "\(lines)")
        #expect(stderr.contains("DPoP-bound to the device key \(jkt)"), "\(stderr)")

        // The stored sign-in records the binding; introspection (by a resource-server client) shows it.
        let stored = try DPoPCheck.storedTokens(directory)
        #expect(stored["tokenType"]?.stringValue == "DPoP" && stored["dpopJkt"] == .string(jkt), "\(stored.members.map(\.key))")
        let accessToken = try cli.run("access-token").output
        let introspection = try peer.introspect(accessToken)
        #expect(introspection["active"] == .bool(true) && introspection["token_type"] == .string("DPoP"))
        #expect(introspection["cnf"]?.objectValue?["jkt"] == .string(jkt), "\(introspection)")
        let json = try JSONParser.parse(try cli.run("--json", "access-token").output).objectValue!
        #expect(json["tokenType"] == .string("DPoP") && json["dpopJkt"] == .string(jkt))

        // The curl recipe of docs/sign-in.md, as written, at glewlwyd's userinfo.
        // (peer.document is the oidc plugin's; oidc-dpop's endpoints are below its own issuer.)
        let userinfo = try #require(peer.dpopDiscovery.components(separatedBy: "/.well-known/").first) + "/userinfo"
        let answer = try DPoPCheck.runRecipe(cli, url: userinfo)
        #expect(answer.status == 0 && answer.stdout.hasPrefix("HTTP/1.1 200") && answer.stdout.contains(#""sub":"#), "\(answer)")
        // Again and again, across glewlwyd's nonce rotations (every 4 proofs): each one answered 200.
        let statuses = try (0..<10).map { _ in String(try DPoPCheck.runRecipe(cli, url: userinfo).stdout.prefix(12)) }
        #expect(statuses.allSatisfy { $0 == "HTTP/1.1 200" }, "\(statuses)")

        // The proof checked independently: header, claims, ath, nonce, and jwcrypto's thumbprint = cnf.jkt.
        let nonce = try DPoPCheck.cachedNonce(cli)
        let proof = try cli.run("dpop-proof", "--method", "GET", "--url", userinfo + "?q=1#f").output
        let checked = try DPoPCheck.verify(proof, method: "GET", url: userinfo, accessToken: accessToken, nonce: nonce, jkt: jkt)
        #expect(checked?["jkt"] == .string(jkt))

        // Refresh through several nonce rotations (4 proofs a nonce): each works, bound to the same key.
        var previous = accessToken
        for _ in 0..<6 {
            let refreshed = try cli.run("access-token", "--refresh")
            #expect(refreshed.status == 0 && refreshed.output != previous, "\(refreshed)")
            previous = refreshed.output
        }
        #expect(try peer.introspect(previous)["cnf"]?.objectValue?["jkt"] == .string(jkt))
        #expect(try DPoPCheck.runRecipe(cli, url: userinfo).stdout.hasPrefix("HTTP/1.1 200"))
    }

    /// CIBA's token polls go through the same place: with a device key, a CIBA sign-in at a server that
    /// advertises DPoP gets tokens bound to it.
    @Test func aCIBASignInGetsBoundTokens() throws {
        let peer = try GlewlwydPeer()
        let directory = TemporaryDirectory()
        let cli = try DPoPCheck.softwareKey(directory)
        let jkt = try DPoPCheck.fingerprint(cli)
        let login = try RunningCommand(cli, ["login", "--ciba", "--dpop", "--discovery", peer.dpopDiscovery, "--client-id", peer.clientID,
                                             "--login-hint", #"{"username":"demo"}"#, "--binding-message", "dpop ciba", "--scope", "openid offline_access", "--json"])
        _ = login.nextLine()
        let approval = try peer.approveCIBA(binding: "dpop ciba")
        #expect(approval.status == 0, "\(approval)")
        let (status, lines, stderr) = login.finish()
        #expect(status == 0 && stderr.contains("DPoP-bound to the device key \(jkt)"), "\(lines) \(stderr)")
        let introspection = try peer.introspect(try cli.run("access-token").output)
        #expect(introspection["token_type"] == .string("DPoP") && introspection["cnf"]?.objectValue?["jkt"] == .string(jkt), "\(introspection)")
        #expect(try cli.run("access-token", "--refresh").status == 0)
    }

    /// The attacks: a copied refresh token with a proof of another key is refused; a proof is good once.
    @Test func aForeignKeyAndAReplayedProofAreRefused() throws {
        let peer = try GlewlwydPeer()
        let directory = TemporaryDirectory()
        let cli = try DPoPCheck.softwareKey(directory)
        let login = try RunningCommand(cli, ["login", "--device-code", "--dpop", "--discovery", peer.dpopDiscovery, "--client-id", peer.clientID,
                                             "--scope", "openid offline_access", "--json"])
        let started = try #require(login.nextLine().flatMap { try? JSONParser.parse($0).objectValue })
        #expect(try peer.approve(try #require(started["user_code"]?.stringValue), plugin: "oidc-dpop").status == 0)
        #expect(login.finish().status == 0)
        let stored = try DPoPCheck.storedTokens(directory)
        let refreshToken = try #require(stored["refreshToken"]?.stringValue)
        let tokenEndpoint = try #require(stored["tokenEndpoint"]?.stringValue)
        let form = ["grant_type=refresh_token", "refresh_token=\(refreshToken)", "client_id=\(peer.clientID)"]
        // The stolen refresh token, with a proof of the thief's key (and the current nonce): refused.
        let foreign = try DPoPCheck.foreignProof(directory, method: "POST", url: tokenEndpoint, nonce: try DPoPCheck.cachedNonce(cli))
        let stolen = try DPoPCheck.curl(tokenEndpoint, form: form, headers: ["DPoP: \(foreign)"])
        #expect(stolen.status != "200" && !stolen.body.contains("access_token"), "\(stolen)")
        // The same request with a proof of the device key passes (the refusal was the key's)...
        let proof = try cli.run("dpop-proof", "--method", "POST", "--url", tokenEndpoint).output
        let first = try DPoPCheck.curl(tokenEndpoint, form: form, headers: ["DPoP: \(proof)"])
        #expect(first.status == "200" && first.body.contains("access_token"), "\(first)")
        // ... once: the same proof again is refused.
        let replayed = try DPoPCheck.curl(tokenEndpoint, form: form, headers: ["DPoP: \(proof)"])
        #expect(replayed.status != "200" && !replayed.body.contains("access_token"), "\(replayed)")
        // devtrust itself still refreshes (new proofs, the nonce learnt again if it rotated).
        #expect(try cli.run("access-token", "--refresh").status == 0)
    }
}

/// DPoP against the reference server, which checks every proof strictly (Tests/ReferenceServer/dpop.py),
/// at the token endpoint and at a resource (/resource) that compares the proof key with the token's.
@Suite(.enabled(if: ReferenceServer.shouldRun)) struct DPoPReferenceTests {
    static func signIn(_ server: ReferenceServer, _ directory: TemporaryDirectory, _ extra: [String] = []) throws -> DevtrustBinary {
        let cli = try DPoPCheck.softwareKey(directory)
        let login = try cli.run(["login", "--device-code", "--server", server.url, "--client-id", "devtrust-app", "--json"] + extra)
        #expect(login.status == 0, "\(login)")
        return cli
    }

    @Test func theResourceAcceptsTheRecipeAndRefusesEveryBadProof() throws {
        let server = try ReferenceServer(["--dpop", "--dpop-nonce", "--dpop-nonce-uses", "2", "--device-interval", "1", "--device-approve-after", "2"])
        let directory = TemporaryDirectory()
        let cli = try Self.signIn(server, directory)
        let jkt = try DPoPCheck.fingerprint(cli)
        let resource = server.url + "/resource"
        // The recipe, as docs/sign-in.md writes it: the resource checks ath, the key, the nonce.
        let answer = try DPoPCheck.runRecipe(cli, url: resource)
        #expect(answer.stdout.hasPrefix("HTTP/1.1 200") && answer.stdout.contains(#""jkt": "\#(jkt)""#), "\(answer)")
        let accessToken = try cli.run("access-token").output
        func currentNonce() throws -> String {
            // A request the server refuses for want of the nonce says the current one in DPoP-Nonce.
            let proof = try cli.run("dpop-proof", "--method", "GET", "--url", resource, "--nonce", "stale").output
            let result = try ProcessRunner.run("/usr/bin/curl", ["-s", "-D", "-", "-o", "/dev/null", "-H", "Authorization: DPoP \(accessToken)",
                                                                 "-H", "DPoP: \(proof)", resource])
            let line = try #require(result.stdout.split(separator: "\r\n").first { $0.lowercased().hasPrefix("dpop-nonce:") })
            return String(line.split(separator: " ").last!)
        }
        func get(_ proof: String, scheme: String = "DPoP") throws -> (status: String, body: String) {
            try DPoPCheck.curl(resource, headers: ["Authorization: \(scheme) \(accessToken)", "DPoP: \(proof)"])
        }
        // A proof of the device key, made by devtrust with the nonce: accepted (the control).
        let good = try get(try cli.run("dpop-proof", "--method", "GET", "--url", resource, "--nonce", try currentNonce()).output)
        #expect(good.status == "200", "\(good)")
        // Another key, with the right ath and nonce: refused for its key.
        let foreign = try get(try DPoPCheck.foreignProof(directory, method: "GET", url: resource, accessToken: accessToken, nonce: try currentNonce()))
        #expect(foreign.status == "401" && foreign.body.contains("not the token's"), "\(foreign)")
        // The device key's own proofs (signed here with its software key file), without ath and with another token's: refused.
        let deviceKeyFile = directory.file("ks/" + (try #require(directory.entries("ks").first { $0.hasPrefix("key-") })))
        let withATH = try get(try DPoPCheck.foreignProof(directory, method: "GET", url: resource, accessToken: accessToken, nonce: try currentNonce(),
                                                         keyFile: deviceKeyFile))
        #expect(withATH.status == "200", "the device key's proof made outside devtrust is refused: the checks below prove nothing \(withATH)")
        let noATH = try get(try DPoPCheck.foreignProof(directory, method: "GET", url: resource, nonce: try currentNonce(), keyFile: deviceKeyFile))
        #expect(noATH.status == "401" && noATH.body.contains("no ath"), "\(noATH)")
        let wrongATH = try get(try DPoPCheck.foreignProof(directory, method: "GET", url: resource, accessToken: accessToken + "x", nonce: try currentNonce(),
                                                          keyFile: deviceKeyFile))
        #expect(wrongATH.status == "401" && wrongATH.body.contains("ath is not"), "\(wrongATH)")
        // A bound token used as a bearer token: refused.
        let bearer = try DPoPCheck.curl(resource, headers: ["Authorization: Bearer \(accessToken)"])
        #expect(bearer.status == "401", "\(bearer)")
        // The proof for another method or URL, or one replayed: refused.
        let proof = try cli.run("dpop-proof", "--method", "POST", "--url", resource, "--nonce", try currentNonce()).output
        #expect(try get(proof).status == "401")
        let once = try cli.run("dpop-proof", "--method", "GET", "--url", resource, "--nonce", try currentNonce()).output
        #expect(try get(once).status == "200")
        #expect(try get(once).status == "401")
        let refusals = try server.get("/api/dpop-refusals").arrayValue?.compactMap(\.stringValue) ?? []
        #expect(refusals.contains { $0.hasPrefix("htm is") } && refusals.contains("jti replayed"), "\(refusals)")
    }

    /// Nonces that rotate every 2 proofs: refreshes and resource requests go on working, one retry at most each.
    @Test func rotatingNoncesAreFollowedAndRefreshProvesTheSameKey() throws {
        let server = try ReferenceServer(["--dpop", "--dpop-nonce", "--dpop-nonce-uses", "2", "--device-interval", "1", "--device-approve-after", "2"])
        let directory = TemporaryDirectory()
        let cli = try Self.signIn(server, directory)
        let jkt = try DPoPCheck.fingerprint(cli)
        for _ in 0..<5 {
            let refreshed = try cli.run("access-token", "--refresh")
            #expect(refreshed.status == 0, "\(refreshed)")
            let answer = try DPoPCheck.runRecipe(cli, url: server.url + "/resource")
            #expect(answer.stdout.contains(#""jkt": "\#(jkt)""#), "\(answer)")
            // The resource proof the server just took, checked independently against this access token.
            let proof = try #require(try server.get("/api/dpop-proofs").arrayValue?.last?.stringValue)
            _ = try DPoPCheck.verify(proof, method: "GET", url: server.url + "/resource", accessToken: refreshed.output,
                                     nonce: Self.claims(proof)["nonce"]?.stringValue, jkt: jkt)
        }
        // Every proof devtrust sent to the token endpoint checks out independently too.
        let proofs = try server.get("/api/dpop-proofs").arrayValue?.compactMap(\.stringValue) ?? []
        let tokenProofs = try proofs.filter { try Self.claims($0)["htu"]?.stringValue == server.url + "/oauth2/token" }
        #expect(tokenProofs.count >= 7, "\(proofs.count) proofs")
        for proof in tokenProofs {
            _ = try DPoPCheck.verify(proof, method: "POST", url: server.url + "/oauth2/token", nonce: try Self.claims(proof)["nonce"]?.stringValue, jkt: jkt)
        }
        // The nonce rotated (every 2 proofs), and devtrust followed: more than one nonce was used.
        #expect(Set(try proofs.compactMap { try Self.claims($0)["nonce"]?.stringValue }).count >= 4)
    }

    /// The curl recipe of docs/sign-in.md, ten times in a row at a resource whose nonce rotates every 2
    /// proofs: every request gets 200, and the nonce a retry hands over is kept for the next proof.
    @Test func theRecipeKeepsWorkingAcrossNonceRotations() throws {
        let server = try ReferenceServer(["--dpop", "--dpop-nonce", "--dpop-nonce-uses", "2", "--device-interval", "1", "--device-approve-after", "2"])
        let directory = TemporaryDirectory()
        let cli = try Self.signIn(server, directory)
        let resource = server.url + "/resource"
        let statuses = try (0..<10).map { _ in String(try DPoPCheck.runRecipe(cli, url: resource).stdout.prefix(12)) }
        #expect(statuses.allSatisfy { $0 == "HTTP/1.1 200" }, "\(statuses)")
        // The nonce rotated: the resource took proofs of more than 3 nonces.
        let proofs = try server.get("/api/dpop-proofs").arrayValue?.compactMap(\.stringValue) ?? []
        let resourceNonces = try proofs.filter { try Self.claims($0)["htu"]?.stringValue == resource }.compactMap { try Self.claims($0)["nonce"]?.stringValue }
        #expect(Set(resourceNonces).count > 3, "\(resourceNonces)")

        // --nonce is kept for the URL's origin: the next proof there carries it.
        let given = try cli.run("dpop-proof", "--method", "GET", "--url", resource, "--nonce", "given-nonce_1")
        let givenClaims = try Self.claims(given.output)
        #expect(given.status == 0 && givenClaims["nonce"] == .string("given-nonce_1"), "\(given)")
        let next = try cli.run("dpop-proof", "--method", "POST", "--url", server.url + "/other")
        #expect((try Self.claims(next.output))["nonce"] == .string("given-nonce_1"), "\(next)")
    }

    /// One nonce rule (RFC 9449's NQCHAR, at most 4096 bytes) for --nonce.
    @Test func anInvalidNonceIsRefused() throws {
        let server = try ReferenceServer(["--dpop", "--device-interval", "1", "--device-approve-after", "2"])
        let directory = TemporaryDirectory()
        let cli = try Self.signIn(server, directory)
        for nonce in ["with space", "quote\"d", "back\\slash", "\u{1B}[31m", "caf\u{E9}", String(repeating: "n", count: 4097)] {
            let proof = try cli.run("dpop-proof", "--method", "GET", "--url", server.url + "/resource", "--nonce", nonce)
            #expect(proof.status == 2 && proof.stdout.isEmpty && proof.stderr.contains("--nonce must be"), "\(proof)")
        }
        #expect(try cli.run("dpop-proof", "--method", "GET", "--url", server.url + "/resource", "--nonce", String(repeating: "n", count: 4096)).status == 0)
    }

    /// htu is the URL as a server knows it (RFC 3986 6.2.2, 6.2.3): scheme and host in lower case, no
    /// default port, "/" for an empty path; the path and its percent-encoding as given. A proof for the
    /// URL typed in capitals is accepted by the reference server, which compares htu with its own URL.
    @Test func htuIsTheNormalisedURL() throws {
        let server = try ReferenceServer(["--dpop", "--device-interval", "1", "--device-approve-after", "2"])
        let directory = TemporaryDirectory()
        let cli = try Self.signIn(server, directory)
        let cases = [
            "HTTPS://EXAMPLE.COM:443/x/": "https://example.com/x/",
            "https://example.com": "https://example.com/",
            "https://Example.com:443": "https://example.com/",
            "https://example.com:8443/A%2fB/?q=1#f": "https://example.com:8443/A%2fB/",
            "https://example.com:/p": "https://example.com/p",
            "https://[::1]:443/x": "https://[::1]/x",
            "HTTP://LocalHost:80?q": "http://localhost/",
            "http://127.0.0.1:8080/Case/%7e": "http://127.0.0.1:8080/Case/%7e",
        ]
        for (typed, htu) in cases {
            let proof = try cli.run("dpop-proof", "--method", "GET", "--url", typed)
            #expect(proof.status == 0, "\(typed): \(proof)")
            guard proof.status == 0 else { continue }
            let claims = try Self.claims(proof.output)
            #expect(claims["htu"] == .string(htu) && claims["htm"] == .string("GET"), "\(typed): \(claims)")
        }
        let accessToken = try cli.run("access-token").output
        let shouted = server.url.replacingOccurrences(of: "http://", with: "HTTP://") + "/resource"
        let proof = try cli.run("dpop-proof", "--method", "GET", "--url", shouted).output
        let answer = try DPoPCheck.curl(server.url + "/resource", headers: ["Authorization: DPoP \(accessToken)", "DPoP: \(proof)"])
        #expect(answer.status == "200", "\(answer)")
    }

    /// A clock 3 s fast, at a server that allows no future iat (glewlwyd's default): the proofs are written in
    /// the server's time, measured from its Date headers, although device tokens correct only beyond 5 s.
    @Test func proofsAreInTheServersTimeWhenTheClockIsAFewSecondsFast() throws {
        let server = try ReferenceServer(["--dpop", "--dpop-iat-ahead", "0", "--clock-offset", "-3", "--device-interval", "1", "--device-approve-after", "2"])
        let directory = TemporaryDirectory()
        let cli = try Self.signIn(server, directory)
        #expect(try DPoPCheck.storedTokens(directory)["tokenType"]?.stringValue == "DPoP")
        let refresh = try cli.run("access-token", "--refresh")
        #expect(refresh.status == 0, "\(refresh)")
        let accessToken = try cli.run("access-token").output
        let proof = try cli.run("dpop-proof", "--method", "GET", "--url", server.url + "/resource").output
        let answer = try DPoPCheck.curl(server.url + "/resource", headers: ["Authorization: DPoP \(accessToken)", "DPoP: \(proof)"])
        #expect(answer.status == "200", "\(answer)")
    }

    /// htm is compared case-sensitively: a method in lower case is refused with the fix. A URL that is no
    /// usable resource URL is called one.
    @Test func aLowerCaseMethodAndABadURLAreUsageErrors() throws {
        let server = try ReferenceServer(["--dpop", "--device-interval", "1", "--device-approve-after", "2"])
        let directory = TemporaryDirectory()
        let cli = try Self.signIn(server, directory)
        for (method, fix) in [("get", "--method GET"), ("Post", "--method POST"), ("m-search", "--method M-SEARCH")] {
            let proof = try cli.run("dpop-proof", "--method", method, "--url", server.url + "/resource")
            #expect(proof.status == 2 && proof.stdout.isEmpty && proof.stderr.contains("use \(fix)"), "\(proof)")
        }
        for url in ["ftp://example.com/x", "example.com/x", "https://example.com:99999/x"] {
            let proof = try cli.run("dpop-proof", "--method", "GET", "--url", url)
            #expect(proof.status == 2 && proof.stdout.isEmpty && proof.stderr.contains("is not a usable resource URL")
                    && !proof.stderr.contains("server URL"), "\(proof)")
        }
    }

    /// The retry after use_dpop_nonce takes the nonce from the answer: it works where the cache directory
    /// cannot be written, and with a nonce longer than any devtrust kept before (3000 characters).
    @Test func theNonceRetryDoesNotDependOnTheCache() throws {
        let server = try ReferenceServer(["--dpop", "--dpop-nonce", "--device-interval", "1", "--device-approve-after", "2"])
        let directory = TemporaryDirectory()
        let cli = try Self.signIn(server, directory)
        // A cache directory others can read is not used (CacheDirectory): no nonce is kept or read.
        #expect(chmod(cli.cacheDirectory, 0o755) == 0)
        defer { _ = chmod(cli.cacheDirectory, 0o700) }
        for _ in 0..<3 {
            let refreshed = try cli.run("access-token", "--refresh")
            #expect(refreshed.status == 0, "\(refreshed)")
        }
        // A fresh sign-in there too.
        let again = try cli.run("login", "--device-code", "--server", server.url, "--client-id", "devtrust-app", "--json")
        #expect(again.status == 0 && again.stderr.contains("DPoP-bound"), "\(again)")

        let long = try ReferenceServer(["--dpop", "--dpop-nonce", "--dpop-nonce-form", "long", "--device-interval", "1", "--device-approve-after", "2"])
        let longDirectory = TemporaryDirectory()
        let longCLI = try Self.signIn(long, longDirectory)
        #expect(try longCLI.run("access-token", "--refresh").status == 0)
        let proofs = try long.get("/api/dpop-proofs").arrayValue?.compactMap(\.stringValue) ?? []
        #expect(try proofs.contains { (try Self.claims($0)["nonce"]?.stringValue?.count ?? 0) == 3000 }, "\(proofs.count) proofs")
    }

    /// A server's DPoP-Nonce that breaks RFC 9449's rule (an escape sequence, a non-ASCII letter) is
    /// neither kept nor sent: the sign-in that needs it fails, saying so.
    @Test func anInvalidServerNonceIsAClearError() throws {
        let server = try ReferenceServer(["--dpop", "--dpop-nonce", "--dpop-nonce-form", "invalid", "--device-interval", "1", "--device-approve-after", "2"])
        let directory = TemporaryDirectory()
        let cli = try DPoPCheck.softwareKey(directory)
        let login = try cli.run("login", "--device-code", "--server", server.url, "--client-id", "devtrust-app", "--json")
        #expect(login.status == 5 && login.stderr.contains("not a valid nonce") && !login.stderr.contains("\u{1B}"), "\(login)")
        let proofs = try server.get("/api/dpop-proofs").arrayValue?.compactMap(\.stringValue) ?? []
        #expect(try proofs.allSatisfy { try Self.claims($0)["nonce"] == nil }, "a proof carried the invalid nonce")
        let file = FileManager.default.contents(atPath: cli.cacheDirectory + "/dpop-nonces.json").map { String(decoding: $0, as: UTF8.self) } ?? ""
        #expect(!file.contains("\u{1B}") && !file.contains("\\u001b") && !file.contains("\u{E9}"), "\(file)")
    }

    /// A server that answers use_dpop_nonce to every proof gets the token request twice (the retry with
    /// its nonce), no more, and devtrust says what is wrong.
    @Test func theNonceRetryHappensOnce() throws {
        let directory = TemporaryDirectory()
        let cli = try DPoPCheck.softwareKey(directory)
        let broken = try ReferenceServer(["--dpop", "--dpop-nonce", "--dpop-nonce-form", "never", "--device-interval", "1", "--device-approve-after", "2"])
        let login = try cli.run("login", "--device-code", "--server", broken.url, "--client-id", "devtrust-app", "--json")
        #expect(login.status == 5 && login.stderr.contains("does not accept its own nonces"), "\(login)")
        let proofs = try broken.get("/api/dpop-proofs").arrayValue?.compactMap(\.stringValue) ?? []
        let tokenProofs = try proofs.filter { try Self.claims($0)["htu"]?.stringValue == broken.url + "/oauth2/token" }
        #expect(tokenProofs.count == 2, "\(tokenProofs.count) token requests")
        // The second one carried the nonce the first answer gave.
        if tokenProofs.count == 2 { #expect(try Self.claims(tokenProofs[1])["nonce"]?.stringValue != nil, "the retry carried no nonce") }
    }

    /// Each server's nonces are its own: two servers, both demanding nonces, one keystore.
    @Test func twoServersKeepTheirOwnNonces() throws {
        let first = try ReferenceServer(["--dpop", "--dpop-nonce", "--device-interval", "1", "--device-approve-after", "2"])
        let second = try ReferenceServer(["--dpop", "--dpop-nonce", "--device-interval", "1", "--device-approve-after", "2"])
        let directory = TemporaryDirectory()
        let cli = try Self.signIn(first, directory)
        let login = try cli.run("login", "--device-code", "--server", second.url, "--client-id", "devtrust-app", "--json")
        #expect(login.status == 0, "\(login)")
        let bytes = try #require(FileManager.default.contents(atPath: cli.cacheDirectory + "/dpop-nonces.json"))
        let nonces = try #require(try JSONParser.parse(Array(bytes)).objectValue)
        #expect(Set(nonces.members.map(\.key)) == [first.url, second.url], "\(nonces)")
        // A proof for each server's resource carries that server's nonce.
        for server in [first, second] {
            let proof = try cli.run("dpop-proof", "--server", server.url, "--method", "GET", "--url", server.url + "/resource")
            #expect((try Self.claims(proof.output))["nonce"] == nonces[server.url], "\(proof)")
        }
        #expect(nonces[first.url] != nonces[second.url])
    }

    /// DPoP can be turned off where the server advertises it: --no-dpop, or a profile's "dpop": false.
    @Test func noDPoPAndAProfileSayingFalseGiveBearerTokens() throws {
        let server = try ReferenceServer(["--dpop", "--device-interval", "1", "--device-approve-after", "2"])
        let directory = TemporaryDirectory()
        var cli = DevtrustBinary(keystore: directory.file("ks"))
        cli.extraEnvironment["DEVTRUST_TCTI"] = "device:/nonexistent"
        let profile: JSONObject = ["server": .string(server.url), "clientId": .string("devtrust-app"), "dpop": .bool(false)]
        cli.extraEnvironment["DEVTRUST_CONFIG"] = directory.write("config.json", JSONWriter.string(.object(["signIn": .object(["profiles": .object(["bearer": .object(profile)])])])))
        try cli.run("init", "--backend", "software", "-q")
        let both = try cli.run("login", "--device-code", "--dpop", "--no-dpop", "--server", server.url, "--client-id", "devtrust-app")
        #expect(both.status == 2 && both.stderr.contains("--no-dpop"), "\(both)")
        #expect(both.stderr.contains("give either --dpop or --no-dpop, not both"), "\(both)")
        for arguments in [["--no-dpop", "--server", server.url, "--client-id", "devtrust-app"], ["--profile", "bearer"]] {
            let login = try cli.run(["login", "--device-code", "--json"] + arguments)
            #expect(login.status == 0 && !login.stderr.contains("DPoP-bound"), "\(login)")
            #expect(try DPoPCheck.storedTokens(directory)["dpopJkt"] == nil)
            let json = try cli.run("--json", "access-token").output
            #expect(json.contains(#""tokenType":"Bearer""#), "\(json)")
        }
        // No proof reached the token endpoint.
        #expect(try server.get("/api/dpop-proofs").arrayValue?.isEmpty == true)
        // --dpop wins over the profile's false.
        let bound = try cli.run("login", "--device-code", "--profile", "bearer", "--dpop", "--json")
        #expect(bound.status == 0 && bound.stderr.contains("DPoP-bound"), "\(bound)")
    }

    /// Only advertised, DPoP never breaks a sign-in that worked before: a device key file that cannot be
    /// read (a keystore error, not a missing key) leaves bearer tokens and a warning, not exit 7.
    @Test func aDamagedKeyFileWhereDPoPIsOnlyAdvertisedGivesBearerTokens() throws {
        let server = try ReferenceServer(["--dpop", "--device-interval", "1", "--device-approve-after", "2"])
        let directory = TemporaryDirectory()
        let cli = try DPoPCheck.softwareKey(directory)
        let keyFiles = try FileManager.default.contentsOfDirectory(atPath: directory.file("ks")).filter { $0.hasPrefix("key-") && $0.hasSuffix(".pem") }
        #expect(keyFiles.count == 1)
        for name in keyFiles { directory.write("ks/" + name, "-----BEGIN PRIVATE KEY-----\nbroken\n-----END PRIVATE KEY-----\n") }
        let login = try cli.run("login", "--device-code", "--server", server.url, "--client-id", "devtrust-app", "--json")
        #expect(login.status == 0, "\(login)")
        #expect(login.stderr.contains("the server offers DPoP-bound tokens, but ") && login.stderr.contains("; signing in for bearer tokens"), "\(login)")
        #expect(try DPoPCheck.storedTokens(directory)["dpopJkt"] == nil)
        #expect(try server.get("/api/dpop-proofs").arrayValue?.isEmpty == true)
    }

    static func claims(_ proof: String) throws -> JSONObject {
        try JSONParser.parse(try Base64URL.decode(String(proof.split(separator: ".")[1]))).objectValue ?? JSONObject()
    }

    /// App-native sign-in: the code exchange carries the proof too (the profile asks for DPoP here).
    @Test func appNativeSignInWithAProfileGetsBoundTokens() throws {
        let server = try ReferenceServer(["--dpop", "--dpop-nonce"])
        let directory = TemporaryDirectory()
        var cli = DevtrustBinary(keystore: directory.file("ks"))
        cli.extraEnvironment["DEVTRUST_TCTI"] = "device:/nonexistent"
        let profile: JSONObject = ["server": .string(server.url), "clientId": .string("devtrust-app"), "dpop": .bool(true)]
        cli.extraEnvironment["DEVTRUST_CONFIG"] = directory.write("config.json", JSONWriter.string(.object(["signIn": .object(["profiles": .object(["app": .object(profile)])])])))
        try cli.run("init", "--backend", "software", "-q")
        let login = try cli.run("login", "--profile", "app", "--non-interactive", "--authenticator", "BasicAuthenticator",
                                "--input", "username=alice@example.com", "--input", "password=correct horse")
        let jkt = try DPoPCheck.fingerprint(cli)
        #expect(login.status == 0 && login.stderr.contains("DPoP-bound to the device key \(jkt)"), "\(login)")
        let answer = try DPoPCheck.runRecipe(cli, url: server.url + "/resource")
        #expect(answer.stdout.hasPrefix("HTTP/1.1 200") && answer.stdout.contains("alice@example.com"), "\(answer)")
    }

    /// A damaged nonce file is no nonce: the server asks for one, and the file is written anew.
    @Test func aDamagedNonceFileDoesNotBlockTheSignIn() throws {
        let server = try ReferenceServer(["--dpop", "--dpop-nonce", "--device-interval", "1", "--device-approve-after", "2"])
        let directory = TemporaryDirectory()
        let cli = try Self.signIn(server, directory)
        let file = cli.cacheDirectory + "/dpop-nonces.json"
        #expect(FileManager.default.createFile(atPath: file, contents: Array("{\"http://127.0.0.1:1\": [".utf8).withUnsafeBufferPointer { Data($0) },
                                               attributes: [.posixPermissions: 0o600]))
        let refreshed = try cli.run("access-token", "--refresh")
        #expect(refreshed.status == 0, "\(refreshed)")
        #expect(try DPoPCheck.cachedNonce(cli).count > 8)
    }

    /// A refresh with another key (the device key replaced) is not attempted: devtrust says the sign-in is
    /// bound to the old key. And the server refuses a bound refresh token without a proof.
    @Test func aReplacedDeviceKeyCannotUseTheBoundSignIn() throws {
        let server = try ReferenceServer(["--dpop", "--device-interval", "1", "--device-approve-after", "2"])
        let directory = TemporaryDirectory()
        let cli = try Self.signIn(server, directory)
        let stored = try DPoPCheck.storedTokens(directory)
        let refreshToken = try #require(stored["refreshToken"]?.stringValue)
        let bare = try DPoPCheck.curl(server.url + "/oauth2/token", form: ["grant_type=refresh_token", "refresh_token=\(refreshToken)", "client_id=devtrust-app"])
        #expect(bare.status == "400" && bare.body.contains("invalid_dpop_proof"), "\(bare)")
        try cli.run("init", "--backend", "software", "--force", "-q")
        let refresh = try cli.run("access-token", "--refresh")
        #expect(refresh.status == 3 && refresh.stderr.contains("DPoP-bound to the key") && refresh.stderr.contains("run `devtrust login` again"), "\(refresh)")
        let proof = try cli.run("dpop-proof", "--method", "GET", "--url", server.url + "/resource")
        #expect(proof.status == 3 && proof.stdout.isEmpty, "\(proof)")
    }

    /// A server that does not advertise DPoP: without --dpop, bearer tokens as before; with --dpop,
    /// the proof goes, the server ignores it, and devtrust says the tokens are not bound.
    @Test func aServerWithoutDPoPGivesBearerTokensAndSaysSo() throws {
        let server = try ReferenceServer(["--device-interval", "1", "--device-approve-after", "2"])
        let directory = TemporaryDirectory()
        let cli = try DPoPCheck.softwareKey(directory)
        let login = try cli.run("login", "--device-code", "--dpop", "--server", server.url, "--client-id", "devtrust-app", "--json")
        #expect(login.status == 0 && login.stderr.contains("not bound to the device key"), "\(login)")
        #expect(try DPoPCheck.storedTokens(directory)["dpopJkt"] == nil)
        let proof = try cli.run("dpop-proof", "--method", "GET", "--url", server.url + "/resource")
        #expect(proof.status == 3 && proof.stderr.contains("login --dpop"), "\(proof)")
        let json = try cli.run("--json", "access-token").output
        #expect(json.contains(#""tokenType":"Bearer""#) && !json.contains("dpopJkt"), "\(json)")
    }
}

/// DPoP through the system agent at glewlwyd (mandatory nonces, rotating every 4 proofs), as a real
/// user: the sign-in is theirs (in their own keystore), its proofs are the agent's, signed with the
/// machine key, so glewlwyd binds the tokens to the machine key's thumbprint; refresh keeps proving it
/// across nonce rotations, and the agent's audit names each proof.
@Suite(.enabled(if: GlewlwydPeer.shouldRun && LocalUser.canMake)) struct DPoPThroughTheAgentGlewlwydTests {
    @Test func aUsersSignInIsBoundToTheMachineKey() throws {
        let peer = try GlewlwydPeer()
        let machine = try MachineAgent()
        try machine.start()
        let alice = try machine.user("alice")
        let jkt = try ProcessRunner.run(machine.binary, ["--keystore", machine.keystore, "pubkey", "--format", "thumbprint"],
                                        environment: machine.agentEnvironment).output
        let login = try alice.account.start(machine.binary, ["login", "--device-code", "--discovery", peer.dpopDiscovery, "--client-id", peer.clientID,
                                                             "--scope", "openid offline_access", "--json"], environment: alice.environment)
        var userCode: String?
        #expect(login.waitFor { stdout, _ in
            userCode = stdout.split(separator: "\n").compactMap { try? JSONParser.parse(String($0)).objectValue?["user_code"]?.stringValue }.first
            return userCode != nil
        }, "\(login.stderr)")
        #expect(try peer.approve(try #require(userCode), plugin: "oidc-dpop").status == 0)
        let finished = try #require(login.finish())
        #expect(finished.status == 0, "\(finished)")
        #expect(finished.stderr.contains("DPoP-bound to the device key \(jkt)"), "\(finished)")

        // The sign-in is alice's own; the machine keystore holds none.
        let accessToken = try alice.devtrust(["access-token"]).output
        #expect(try peer.introspect(accessToken)["cnf"]?.objectValue?["jkt"] == .string(jkt))
        let machineState = try JSONParser.parse(try ProcessRunner.run(machine.binary, ["--keystore", machine.keystore, "status", "--json"],
                                                                      environment: machine.agentEnvironment).stdout).objectValue
        #expect(machineState?["signIns"] == .array([]), "\(String(describing: machineState))")

        // Refresh across nonce rotations: each proof the agent's, each accepted, the binding the same.
        var previous = accessToken
        for _ in 0..<6 {
            let refreshed = try alice.devtrust(["access-token", "--refresh"])
            #expect(refreshed.status == 0 && refreshed.output != previous, "\(refreshed)")
            previous = refreshed.output
        }
        #expect(try peer.introspect(previous)["cnf"]?.objectValue?["jkt"] == .string(jkt))
        let proofs = machine.audit.split(separator: "\n").filter { $0.contains("uid=\(alice.account.uid)") && $0.contains("op=dpop-proof") && $0.contains(#"outcome="ok""#) }
        #expect(proofs.count >= 7, "\(machine.audit)")
    }
}
