import Glibc

/// An exclusive `flock` on the keystore's `.lock` file, held by every
/// mutation. Readers do not take it: they read files that are only ever
/// replaced by rename, so they never see a half-written state.
final class KeystoreLock {
    static let fileName = ".lock"

    private let descriptor: Int32

    /// Waits up to `timeoutMilliseconds` for other writers to finish.
    init(in directory: PrivateDirectory, timeoutMilliseconds: Int) throws(KeystoreError) {
        let path = directory.pathOf(Self.fileName)
        let descriptor = openat(directory.descriptor, Self.fileName, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else {
            if errno == ELOOP { throw .notRegularFile(path: path) }
            throw .io(path: path, operation: "open the lock file", errno: errno)
        }
        var waited = 0
        while flock(descriptor, LOCK_EX | LOCK_NB) != 0 {
            let code = errno
            guard code == EWOULDBLOCK || code == EINTR else {
                close(descriptor)
                throw .io(path: path, operation: "lock", errno: code)
            }
            guard waited < timeoutMilliseconds else {
                close(descriptor)
                throw .locked(path: directory.path, waitedSeconds: timeoutMilliseconds / 1000)
            }
            usleep(10_000)
            waited += 10
        }
        self.descriptor = descriptor
    }

    deinit {
        // Closing the descriptor releases the lock.
        close(descriptor)
    }
}
