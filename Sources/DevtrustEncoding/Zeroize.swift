import Glibc

extension Array where Element == UInt8 {
    /// Overwrites the bytes with zeros (explicit_bzero: the optimiser keeps it).
    /// For buffers that held a secret: key files, private scalars, DER.
    public mutating func zeroize() {
        withUnsafeMutableBytes { buffer in
            if let base = buffer.baseAddress { explicit_bzero(base, buffer.count) }
        }
    }
}
