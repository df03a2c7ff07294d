import DevtrustJOSE
import DevtrustKeys
import Glibc

/// Everything a command takes from outside: injected so that tests run
/// commands in-process against fixed clocks, randomness and streams.
public struct CommandEnvironment {
    public var variables: [String: String]
    public var terminal: any Terminal
    public var clock: any Clock
    public var random: any RandomSource
    public var effectiveUserID: UInt32

    public init(variables: [String: String], terminal: any Terminal, clock: any Clock = SystemClock(),
                random: any RandomSource = SystemRandom(), effectiveUserID: UInt32 = geteuid()) {
        self.variables = variables
        self.terminal = terminal
        self.clock = clock
        self.random = random
        self.effectiveUserID = effectiveUserID
    }

    /// The running process's environment and standard streams.
    public static func process() -> CommandEnvironment {
        var variables = [String: String]()
        var cursor = environ
        while let entry = cursor.pointee {
            let text = String(cString: entry)
            if let equals = text.firstIndex(of: "=") {
                variables[String(text[..<equals])] = String(text[text.index(after: equals)...])
            }
            cursor += 1
        }
        return CommandEnvironment(variables: variables, terminal: ProcessTerminal())
    }
}
