import DevtrustCLI
import Glibc

exit(DevtrustCommandLine.run(Array(CommandLine.arguments.dropFirst()), environment: .process()))
