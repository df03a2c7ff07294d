import DevtrustEncoding
import DevtrustSystem

/// `tls.ca-file`, when `--ca-file` or DEVTRUST_CA_FILE names one: the file every
/// HTTPS request trusts instead of the system's store is readable and holds PEM
/// certificates (curl would fail every request to an https:// server otherwise).
package enum CAFileDiagnosis {
    package static let id = "tls.ca-file"
    package static let title = "CA file for HTTPS"

    package static func check(_ path: String, source: String) -> DoctorCheck {
        let fix = "point \(source) at a PEM file of the CA certificates to trust, or leave it unset to trust the system's store"
        let bytes: [UInt8]
        do {
            bytes = try FileReader.read(path, limit: 16 << 20)
        } catch {
            return DoctorCheck(id, title, .fail, "\(path), the CA file \(source) names, cannot be read (\(error.reason)): every HTTPS request fails", fix: fix)
        }
        let lines = String(decoding: bytes, as: UTF8.self).split(whereSeparator: { $0 == "\n" || $0 == "\r" }).map { $0.trimmingCharacters() }
        var certificates = 0, damaged = 0
        var body: String?
        for line in lines {
            if line == "-----BEGIN CERTIFICATE-----" {
                body = ""
            } else if line == "-----END CERTIFICATE-----", let text = body {
                if let der = try? Base64.decode(text), der.first == 0x30, der.count > 64 { certificates += 1 } else { damaged += 1 }
                body = nil
            } else if body != nil {
                body! += line
            }
        }
        guard certificates > 0, damaged == 0, body == nil else {
            let what = certificates == 0 && damaged == 0 ? "holds no PEM certificate (-----BEGIN CERTIFICATE-----)" : "holds a damaged PEM certificate"
            return DoctorCheck(id, title, .fail, "\(path), the CA file \(source) names, \(what): every HTTPS request fails", fix: fix)
        }
        return DoctorCheck(id, title, .pass, "\(path) (\(source)) holds \(certificates) PEM certificate\(certificates == 1 ? "" : "s")")
    }
}

extension Substring {
    fileprivate func trimmingCharacters() -> String {
        String(drop(while: { $0 == " " || $0 == "\t" }).reversed().drop(while: { $0 == " " || $0 == "\t" }).reversed())
    }
}
