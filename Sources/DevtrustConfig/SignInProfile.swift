import DevtrustEncoding

/// A named sign-in setup in the configuration (`signIn.profiles.NAME`), used
/// with `--profile NAME`; options given on the command line win.
public struct SignInProfile: Equatable, Sendable {
    public var server: String?
    public var discovery: String?
    public var clientId: String?
    public var scope: String?
    public var redirectUri: String?
    /// Push the authorization request first (RFC 9126) for `authorize-url`.
    public var par: Bool?
    public var acrValues: String?
    /// Endpoints the server does not advertise (WSO2 and PingAM publish no
    /// device_authorization_endpoint), by name: authorization, token,
    /// deviceAuthorization, revocation, pushedAuthorizationRequest, backchannelAuthentication (CIBA).
    public var endpoints: [String: String]
    /// The server ends refresh tokens with glewlwyd's non-standard `grant_type=delete_token`
    /// (its public clients cannot use RFC 7009); `logout` tries it only then.
    public var deleteTokenGrant: Bool?
    /// Ask for DPoP-bound tokens (RFC 9449) even when the server's discovery does not advertise them.
    public var dpop: Bool?

    public static let endpointNames = ["authorization", "token", "deviceAuthorization", "revocation", "pushedAuthorizationRequest",
                                       "backchannelAuthentication"]
    public static let knownFields = ["server", "discovery", "clientId", "scope", "redirectUri", "par", "acrValues", "endpoints", "deleteTokenGrant", "dpop"]

    public init(server: String? = nil, discovery: String? = nil, clientId: String? = nil, scope: String? = nil, redirectUri: String? = nil,
                par: Bool? = nil, acrValues: String? = nil, endpoints: [String: String] = [:]) {
        self.server = server
        self.discovery = discovery
        self.clientId = clientId
        self.scope = scope
        self.redirectUri = redirectUri
        self.par = par
        self.acrValues = acrValues
        self.endpoints = endpoints
    }

    /// Names a confidential client's secret goes by in other tools' configurations.
    static let clientSecretFields = ["clientSecret", "client_secret"]

    static func parse(_ reader: JSONObjectReader) throws(JSONFieldError) -> SignInProfile {
        // devtrust signs in as a public client, as the ThunderID SDK's CIBA does: a secret in a file
        // every sign-in reads would be no secret. Said plainly rather than as an unknown field.
        if let field = clientSecretFields.first(where: { reader.object[$0] != nil }) {
            throw JSONFieldError(path: reader.fieldPath(field), kind: .invalidValue(
                "devtrust signs in as a public client (every sign-in, CIBA too) and takes no client secret: remove it, and register the client as public"))
        }
        try reader.rejectUnknownFields(known: knownFields)
        var profile = SignInProfile(
            server: try reader.optionalString("server"), discovery: try reader.optionalString("discovery"),
            clientId: try reader.optionalString("clientId"), scope: try reader.optionalString("scope"),
            redirectUri: try reader.optionalString("redirectUri"), par: try reader.optionalBool("par"),
            acrValues: try reader.optionalString("acrValues"))
        profile.deleteTokenGrant = try reader.optionalBool("deleteTokenGrant")
        profile.dpop = try reader.optionalBool("dpop")
        guard profile.server != nil || profile.discovery != nil else {
            throw JSONFieldError(path: reader.fieldPath("server"), kind: .missingRequiredField)
        }
        guard profile.clientId != nil else { throw JSONFieldError(path: reader.fieldPath("clientId"), kind: .missingRequiredField) }
        if let endpoints = try reader.optionalObject("endpoints") {
            try endpoints.rejectUnknownFields(known: endpointNames)
            for (name, url) in try reader.optionalStringMap("endpoints") {
                guard url.hasPrefix("https://") || url.hasPrefix("http://") else {
                    throw JSONFieldError(path: endpoints.fieldPath(name), kind: .invalidValue("must be an https:// URL"))
                }
                profile.endpoints[name] = url
            }
        }
        return profile
    }
}
