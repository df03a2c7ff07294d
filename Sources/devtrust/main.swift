import DevtrustCLI
import Glibc

// Everything devtrust creates is for the user alone; the keystore also passes
// explicit 0600/0700 modes, so this only guards what a later change might add.
umask(0o077)
exit(DevtrustCommandLine.run(Array(CommandLine.arguments.dropFirst()), environment: .process()))
