import CProcessHardening
import DevtrustCLI
import Glibc

// devtrust holds passwords, tokens and (for a software key) the private key in
// memory: no core dumps of it, and no other process of the same user may
// attach to it or read its memory.
_ = devtrust_make_undumpable()

// Everything devtrust creates is for the user alone; the keystore also passes
// explicit 0600/0700 modes, so this only guards what a later change might add.
umask(0o077)
exit(DevtrustCommandLine.run(Array(CommandLine.arguments.dropFirst()), environment: .process()))
