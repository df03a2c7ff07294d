@testable import DevtrustCLI
import DevtrustTestSupport
import Foundation
import Testing

/// The man page (docs/devtrust.1) and the user's guide (docs/usage.md) against
/// the command specs and the binary (issue 15): every command and option is
/// described, no example names an option its command lacks, and the examples
/// marked runnable give the output and exit codes written under them.
@Suite struct DocumentationTests {
    static let manPagePath = "docs/devtrust.1"
    static let guidePath = "docs/usage.md"

    static func read(_ relative: String) throws -> String {
        try String(contentsOfFile: Repository.path(relative), encoding: .utf8)
    }

    // MARK: - Every command and option is described

    @Test func theManPageDescribesEveryCommandAndOption() throws {
        let problems = DocumentationCoverage.manPageProblems(ManPage(roff: try Self.read(Self.manPagePath)))
        #expect(problems.isEmpty, "\(Self.manPagePath):\n\(problems.joined(separator: "\n"))")
    }

    @Test func theGuideShowsEveryCommandAndOptionInAnExample() throws {
        let problems = DocumentationCoverage.guideProblems(MarkdownGuide(try Self.read(Self.guidePath)))
        #expect(problems.isEmpty, "\(Self.guidePath):\n\(problems.joined(separator: "\n"))")
    }

    /// The checks above can fail: the real documents, each with one mention taken out.
    @Test func removingAnOptionsMentionIsCaught() throws {
        let roff = try Self.read(Self.manPagePath)
        let withoutAccept = roff.replacingOccurrences(of: #"[\fB\-\-accept\fR \fIACTION_ID\fR]..."#, with: "")
            .replacingOccurrences(of: #"\-\-accept"#, with: "")
        #expect(withoutAccept != roff)
        #expect(DocumentationCoverage.manPageProblems(ManPage(roff: withoutAccept)).contains("register: --accept is not described"))
        let wrongOption = roff.replacingOccurrences(of: #"[\fB\-\-flow\-type\fR \fITYPE\fR]"#, with: #"[\fB\-\-flow\fR \fITYPE\fR]"#)
        #expect(wrongOption != roff)
        #expect(DocumentationCoverage.manPageProblems(ManPage(roff: wrongOption)).contains { $0.hasPrefix("register: --flow is not an option") })
        // In an example, on the continuation line of a command.
        let wrongExample = roff.replacingOccurrences(of: #"    \-\-client\-id devtrust\-app"#, with: #"    \-\-client devtrust\-app"#)
        #expect(wrongExample != roff)
        #expect(DocumentationCoverage.manPageProblems(ManPage(roff: wrongExample)).contains { $0.hasPrefix("login: --client is not an option of login") })

        let guide = try Self.read(Self.guidePath)
        let withoutRefresh = guide.replacingOccurrences(of: "--refresh", with: "")
        #expect(withoutRefresh != guide)
        #expect(DocumentationCoverage.guideProblems(MarkdownGuide(withoutRefresh)).contains("access-token: no example shows --refresh"))
        let withoutStatus = guide.replacingOccurrences(of: "devtrust status", with: "devtrust")
        #expect(DocumentationCoverage.guideProblems(MarkdownGuide(withoutStatus)).contains("status: no example runs it"))
        let misspelt = guide + "\n```sh\ndevtrust token --servr https://idp.example\n```\n"
        #expect(DocumentationCoverage.guideProblems(MarkdownGuide(misspelt)).contains { $0.contains("token: --servr is not an option") })
    }

    @Test func invocationsAreReadFromShellLines() {
        let line = #"curl -H "X-Device-Token: $(devtrust -v token --server idp.example)" --data-urlencode x=1 | devtrust --keystore /k verify --jwt -"#
        let found = DevtrustInvocation.all(in: line)
        #expect(found.map(\.command) == ["token", "verify"])
        #expect(found.map(\.options) == [["verbose", "server"], ["keystore", "jwt"]])
        #expect(DevtrustInvocation.all(in: "devtrust: error: run `devtrust register --server URL`, or pass --device-id").map(\.options) == [["server"]])
        #expect(DevtrustInvocation.all(in: "devtrust sign-challenge -- --looks-like-an-option").map(\.options) == [[]])
        #expect(DevtrustInvocation.all(in: "see devtrust(1) and man devtrust").isEmpty)
        #expect(DevtrustInvocation.all(in: "devtrust --version --json").map(\.command) == [nil])
    }

    /// A man page example marked `.\" runnable in docs/usage.md: NAME` is part of the guide's
    /// runnable file NAME, word for word, and so runs with it.
    @Test func theManPagesScriptsAreTheGuidesRunnableOnes() throws {
        let page = ManPage(roff: try Self.read(Self.manPagePath))
        let files = Dictionary(MarkdownGuide(try Self.read(Self.guidePath)).runnableExamples.compactMap { example -> (String, [String])? in
            guard case .file(let name, let contents) = example.kind else { return nil }
            return (name, contents.split(separator: "\n", omittingEmptySubsequences: false).map(String.init))
        }, uniquingKeysWith: { first, _ in first })
        let marked = page.markedExamples(prefix: #".\" runnable in docs/usage.md: "#)
        #expect(marked.count >= 3)
        for (name, lines) in marked {
            let file = files[name] ?? []
            let contained = !lines.isEmpty && file.indices.contains { start in
                start + lines.count <= file.count && Array(file[start..<start + lines.count]) == lines
            }
            #expect(contained, "the man page's \(name) is not a part of docs/usage.md's runnable \(name):\n\(lines.joined(separator: "\n"))")
        }
    }

    // MARK: - The man page renders cleanly

    @Test(.enabled(if: ManPage.renderersInstalled || ExternalTool.isCI))
    func theManPageRendersWithoutWarningsInEightyColumns() throws {
        let page = Repository.path(Self.manPagePath)
        let groff = try ProcessRunner.run("/usr/bin/groff", ["-man", "-ww", "-z", page], environment: ["PATH": "/usr/bin:/bin"])
        #expect(groff.status == 0 && groff.stderr.isEmpty, "\(groff)")
        let man = try ProcessRunner.run("/usr/bin/man", ["--warnings", "-l", page],
                                        environment: ["PATH": "/usr/bin:/bin", "MANWIDTH": "80", "LANG": "C.UTF-8"])
        #expect(man.status == 0 && man.stderr.isEmpty, "\(man.stderr)")
        #expect(man.stdout.contains("EXAMPLES"))
        for line in man.stdout.split(separator: "\n") {
            #expect(line.count <= 80, "\(line.count) columns: \(line)")
        }
    }

    // MARK: - The runnable examples are true

    @Test(.enabled(if: ExampleSession.shouldRun))
    func theGuidesRunnableExamplesGiveTheDocumentedOutput() throws {
        let examples = MarkdownGuide(try Self.read(Self.guidePath)).runnableExamples
        #expect(examples.count >= 10, "the guide's runnable examples were not found")
        let session = try ExampleSession()
        for example in examples {
            for problem in try session.run(example) {
                Issue.record(Comment(rawValue: "\(Self.guidePath):\(example.line): \(problem)"))
            }
        }
    }

    /// The runner can fail: a wrong output, a failure the transcript does not show, a failing script.
    @Test(.enabled(if: ExampleSession.shouldRun))
    func theRunnerReportsWhatTheGuideGetsWrong() throws {
        let session = try ExampleSession()
        let transcript = Transcript(lines: ["$ devtrust --version", "devtrust 9.9.9", "$ devtrust token", "...",
                                            "$ devtrust init --quiet", "$ devtrust pubkey --format thumbprint", "...", "$ echo $?", "0"], line: 1)
        let problems = try session.run(RunnableExample(line: 1, kind: .transcript(transcript)))
        #expect(problems.count == 2, "\(problems)")
        #expect(problems.first?.contains("`devtrust --version` printed\ndevtrust 0.1.0\n--- the guide says\ndevtrust 9.9.9") == true)
        #expect(problems.last?.contains("`devtrust token` exited 3, and the guide does not show it") == true)
        #expect(try session.run(RunnableExample(line: 1, kind: .script("devtrust token --device-id x > /dev/null\n"))).isEmpty)
        #expect(try session.run(RunnableExample(line: 1, kind: .script("devtrust regster\necho not reached\n")))
                == ["the script exited 2:\ndevtrust: error: unknown command \"regster\"; did you mean \"register\"?\n"])
    }

    @Test func transcriptsMatchWithEllipses() {
        #expect(Transcript.matches(["created ... in ~/x", "..."], ["created a key in ~/x", "one", "two"]))
        #expect(Transcript.matches(["a", "...", "z"], ["a", "z"]))
        #expect(!Transcript.matches(["a", "z"], ["a", "b", "z"]))
        #expect(!Transcript.matches(["eyJ..."], ["xeyJ"]))
        #expect(!Transcript.matches(["...ok"], ["ok?"]))
        #expect(Transcript.matches(["...ok"], ["ok"]))
        let transcript = Transcript(lines: ["$ devtrust token \\", "    --server x", "eyJ...", "$ echo $?", "0"], line: 1)
        #expect(transcript.steps.map(\.command) == ["devtrust token \\\n    --server x", "echo $?"])
        #expect(transcript.steps.map(\.expected) == [["eyJ..."], ["0"]])
    }
}

// MARK: - What the documents say

/// The man page's roff source, by section, and as plain text.
struct ManPage {
    /// Sections by their `.SH` name, as roff lines.
    let sections: [String: [String]]

    init(roff: String) {
        var sections = [String: [String]]()
        var current = ""
        for line in roff.split(separator: "\n", omittingEmptySubsequences: false).map(String.init) {
            if line.hasPrefix(".SH ") {
                current = Self.plain(String(line.dropFirst(4))).trimmingCharacters(in: CharacterSet(charactersIn: "\" "))
                sections[current] = []
            } else {
                sections[current, default: []].append(line)
            }
        }
        self.sections = sections
    }

    static var renderersInstalled: Bool {
        FileManager.default.isExecutableFile(atPath: "/usr/bin/groff") && FileManager.default.isExecutableFile(atPath: "/usr/bin/man")
    }

    /// A section's `.TP` entries: the tag line and the body, as plain text.
    func entries(of section: String) -> [(tag: String, body: String)] {
        var entries = [(tag: String, body: String)]()
        var lines = sections[section] ?? []
        while let start = lines.firstIndex(of: ".TP") {
            lines.removeFirst(start + 1)
            let end = lines.firstIndex(of: ".TP") ?? lines.count
            let entry = lines[..<end].map(Self.textOfLine)
            entries.append((entry.first ?? "", entry.dropFirst().joined(separator: "\n")))
        }
        return entries
    }

    /// The `.nf` blocks of EXAMPLES after a comment line that starts with `prefix`, by the rest of that line, as plain text.
    func markedExamples(prefix: String) -> [(name: String, lines: [String])] {
        var found = [(name: String, lines: [String])]()
        let lines = sections["EXAMPLES"] ?? []
        for (index, line) in lines.enumerated() where line.hasPrefix(prefix) {
            guard let start = lines[index...].firstIndex(of: ".nf"), let end = lines[start...].firstIndex(of: ".fi") else { continue }
            found.append((String(line.dropFirst(prefix.count)), lines[(start + 1)..<end].map(Self.plain)))
        }
        return found
    }

    /// A section's lines as plain text.
    func text(of section: String) -> String {
        (sections[section] ?? []).map(Self.textOfLine).joined(separator: "\n")
    }

    /// One roff line as text: font macros give their arguments, other requests nothing.
    static func textOfLine(_ line: String) -> String {
        guard line.hasPrefix(".") else { return plain(line) }
        let request = line.prefix { $0 != " " }
        let arguments = line.dropFirst(request.count).trimmingCharacters(in: .whitespaces)
        switch request {
        case ".B", ".I": return plain(arguments)
        case ".BI", ".BR", ".IB", ".IR", ".RB", ".RI": return plain(roffArguments(arguments).joined())
        default: return ""
        }
    }

    static func roffArguments(_ text: String) -> [String] {
        var arguments = [String](), current = "", quoted = false
        for character in text {
            if character == "\"" { quoted.toggle(); continue }
            if character == " " && !quoted {
                if !current.isEmpty { arguments.append(current); current = "" }
            } else {
                current.append(character)
            }
        }
        if !current.isEmpty { arguments.append(current) }
        return arguments
    }

    /// Roff escapes as the characters they print.
    static func plain(_ roff: String) -> String {
        var text = roff
        for (escape, character) in [(#"\-"#, "-"), (#"\(dq"#, "\""), (#"\(aq"#, "'"), (#"\(ga"#, "`"), (#"\(em"#, "—"), (#"\&"#, ""), (#"\e"#, "\\"),
                                    (#"\fB"#, ""), (#"\fI"#, ""), (#"\fR"#, ""), (#"\fP"#, ""), (#"\ "#, " ")] {
            text = text.replacingOccurrences(of: escape, with: character)
        }
        return text
    }
}

/// docs/usage.md: its code (fenced blocks and inline code) and its runnable examples.
struct MarkdownGuide {
    struct Block {
        let info: String
        let lines: [String]
        /// The line of the opening fence (1-based).
        let line: Int
        /// The `<!-- runnable... -->` comment on the line before the fence, if any.
        let marker: String?
    }

    let blocks: [Block]
    let inlineCode: [String]

    init(_ markdown: String) {
        var blocks = [Block](), inline = [String]()
        let lines = markdown.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        // Text between fences, whose inline code may run across lines.
        var prose = [String]()
        func readInlineCode() {
            let parts = prose.joined(separator: " ").split(separator: "`", omittingEmptySubsequences: false)
            inline += stride(from: 1, to: parts.count - 1, by: 2).map { String(parts[$0]) }
            prose = []
        }
        var index = 0
        while index < lines.count {
            let line = lines[index]
            if line.hasPrefix("```") {
                readInlineCode()
                let start = index
                var content = [String]()
                index += 1
                while index < lines.count && !lines[index].hasPrefix("```") {
                    content.append(lines[index])
                    index += 1
                }
                let previous = start > 0 ? lines[start - 1].trimmingCharacters(in: .whitespaces) : ""
                let marker = previous.hasPrefix("<!-- runnable") ? previous : nil
                blocks.append(Block(info: String(line.dropFirst(3)), lines: content, line: start + 1, marker: marker))
            } else {
                prose.append(line)
            }
            index += 1
        }
        readInlineCode()
        self.blocks = blocks
        inlineCode = inline
    }

    /// Every line of code, continuation lines (after `\`) joined.
    var codeLines: [String] {
        var joined = [String]()
        for block in blocks {
            var pending = ""
            for line in block.lines {
                if line.hasSuffix("\\") {
                    pending += line.dropLast() + " "
                } else {
                    joined.append(pending + line)
                    pending = ""
                }
            }
            if !pending.isEmpty { joined.append(pending) }
        }
        return joined + inlineCode
    }

    /// The blocks after a `<!-- runnable -->` or `<!-- runnable: file NAME -->` line.
    var runnableExamples: [RunnableExample] {
        blocks.compactMap { block in
            guard let marker = block.marker else { return nil }
            let words = marker.replacingOccurrences(of: "<!--", with: "").replacingOccurrences(of: "-->", with: "")
                .split(separator: " ").map(String.init)
            if words.count == 3 && words[0] == "runnable:" && words[1] == "file" {
                return RunnableExample(line: block.line, kind: .file(name: words[2], contents: block.lines.joined(separator: "\n") + "\n"))
            }
            if block.info == "console" {
                return RunnableExample(line: block.line, kind: .transcript(Transcript(lines: block.lines, line: block.line)))
            }
            return RunnableExample(line: block.line, kind: .script(block.lines.joined(separator: "\n") + "\n"))
        }
    }
}

/// One `devtrust ...` command line found in the documentation: the command
/// (nil for `devtrust --version`) and the long names of the options given.
struct DevtrustInvocation: Equatable {
    let command: String?
    let options: [String]

    /// Characters that end a command at its own level: a pipe, a list, a redirection, a comment, Markdown's code quote
    /// (and a `)` that closes a substitution opened before the command).
    static let terminators: Set<Character> = ["|", ";", "&", "<", ">", "#", "`"]

    /// `devtrust`, `"$(devtrust`, `token=$(devtrust`: the word runs devtrust.
    static func startsInvocation(_ word: String) -> Bool {
        let last = word.lastIndex { "($`\"'=".contains($0) }
        return word[(last.map { word.index(after: $0) } ?? word.startIndex)...] == "devtrust"
    }

    static func all(in line: String) -> [DevtrustInvocation] {
        let words = line.split(whereSeparator: { $0 == " " || $0 == "\t" }).map(String.init)
        let commandNames = Set(CommandSpecs.commands.map(\.name))
        let globalValueOptions = Set(CommandSpecs.global.filter { $0.value != nil }.map(\.long))
        let shortNames = Dictionary(CommandSpecs.global.compactMap { option in option.short.map { (String($0), option.long) } },
                                    uniquingKeysWith: { first, _ in first })
        var found = [DevtrustInvocation]()
        for (index, word) in words.enumerated() where startsInvocation(word) {
            var command: String?
            var options = [String]()
            var isInvocation = true
            // Command substitutions opened within this invocation: their words are another invocation's.
            var depth = 0
            var position = index + 1
            scanning: while position < words.count {
                let word = words[position]
                position += 1
                let ownWord = depth == 0
                var ended = false
                var previous: Character = " "
                for character in word {
                    if character == "(" && previous == "$" {
                        depth += 1
                    } else if character == ")" {
                        if depth == 0 { ended = true; break }
                        depth -= 1
                    } else if depth == 0 && terminators.contains(character) {
                        ended = true
                        break
                    }
                    previous = character
                }
                if ownWord {
                    let bare = String(word.prefix { $0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" })
                    if bare == "--" && command != nil {
                        break scanning
                    } else if bare.hasPrefix("--") && bare.count > 2 {
                        let name = String(bare.dropFirst(2))
                        options.append(name)
                        if command == nil && globalValueOptions.contains(name) && !word.contains("=") { position += 1 }
                    } else if bare.hasPrefix("-") && bare.count == 2, let long = shortNames[String(bare.dropFirst())] {
                        options.append(long)
                    } else if command == nil {
                        guard commandNames.contains(bare) else {
                            // No command: prose ("devtrust asks"), a version ("devtrust 0.1.0"), or `devtrust --version > file`.
                            isInvocation = bare.isEmpty && !options.isEmpty
                            break scanning
                        }
                        command = bare
                    }
                }
                if ended { break }
            }
            // `devtrust` alone, as in `man devtrust`, runs nothing worth checking.
            if isInvocation && (command != nil || !options.isEmpty) { found.append(DevtrustInvocation(command: command, options: options)) }
        }
        return found
    }
}

/// What a document leaves out, or names wrongly, against the command specs.
enum DocumentationCoverage {
    static var globalNames: Set<String> { Set(CommandSpecs.global.map(\.long)) }
    static var allOptionNames: Set<String> { globalNames.union(CommandSpecs.commands.flatMap { $0.options.map(\.long) }) }

    /// `--name` as a whole word in `text`.
    static func mentions(_ name: String, in text: String) -> Bool {
        var searchFrom = text.startIndex
        while let range = text.range(of: "--" + name, range: searchFrom..<text.endIndex) {
            let next = range.upperBound < text.endIndex ? text[range.upperBound] : " "
            if !(next.isLetter || next.isNumber || next == "-") { return true }
            searchFrom = range.upperBound
        }
        return false
    }

    /// The `--name` words of a text.
    static func optionWords(in text: String) -> [String] {
        var names = [String]()
        var rest = Substring(text)
        while let range = rest.range(of: "--") {
            let name = rest[range.upperBound...].prefix { $0.isLetter || $0.isNumber || $0 == "-" }
            if let first = name.first, first.isLetter { names.append(String(name)) }
            rest = rest[range.upperBound...].dropFirst(name.count)
        }
        return names
    }

    static func manPageProblems(_ page: ManPage) -> [String] {
        var problems = [String]()
        let globalText = page.text(of: "GLOBAL OPTIONS")
        for option in CommandSpecs.global where !mentions(option.long, in: globalText) {
            problems.append("GLOBAL OPTIONS: --\(option.long) is not described")
        }
        let entries = page.entries(of: "COMMANDS")
        for command in CommandSpecs.commands {
            let own = entries.filter { $0.tag.split(separator: " ").first.map(String.init) == command.name }
            if own.isEmpty {
                problems.append("COMMANDS: \(command.name) has no entry")
                continue
            }
            let text = own.map { $0.tag + "\n" + $0.body }.joined(separator: "\n")
            for option in command.options where !mentions(option.long, in: text) {
                problems.append("\(command.name): --\(option.long) is not described")
            }
            // The synopsis lines name only the command's own options.
            let known = Set(command.options.map(\.long)).union(globalNames)
            for name in own.flatMap({ optionWords(in: $0.tag) }) where !known.contains(name) {
                problems.append("\(command.name): --\(name) is not an option of \(command.name) (synopsis)")
            }
            // The descriptions may name other commands' options, but only real ones.
            for name in own.flatMap({ optionWords(in: $0.body) }) where !allOptionNames.contains(name) {
                problems.append("\(command.name): --\(name) is not an option of any command")
            }
        }
        for entry in entries {
            let name = entry.tag.split(separator: " ").first.map(String.init) ?? ""
            if !CommandSpecs.commands.contains(where: { $0.name == name }) {
                problems.append("COMMANDS: an entry for \"\(name)\", which is no command")
            }
        }
        // Shell lines continued with a backslash are one command.
        for line in page.text(of: "EXAMPLES").replacingOccurrences(of: "\\\n", with: " ").split(separator: "\n") {
            problems += invocationProblems(in: String(line), allowedMistakes: [])
        }
        return problems
    }

    static func guideProblems(_ guide: MarkdownGuide) -> [String] {
        var problems = [String]()
        var invocations = [DevtrustInvocation]()
        // A transcript may show a mistaken option on purpose, with the error it gets.
        var shownMistakes = Set<String>()
        for line in guide.blocks.filter({ $0.info == "console" }).flatMap(\.lines) {
            if let range = line.range(of: "devtrust: error: unknown option --") {
                shownMistakes.insert(String(line[range.upperBound...].prefix { $0.isLetter || $0 == "-" }))
            }
        }
        for line in guide.codeLines {
            invocations += DevtrustInvocation.all(in: line)
            problems += invocationProblems(in: line, allowedMistakes: shownMistakes)
        }
        let given = Set(invocations.flatMap(\.options))
        for option in CommandSpecs.global where !given.contains(option.long) {
            problems.append("no example shows the global option --\(option.long)")
        }
        for command in CommandSpecs.commands {
            let own = invocations.filter { $0.command == command.name }
            if own.isEmpty {
                problems.append("\(command.name): no example runs it")
                continue
            }
            let shown = Set(own.flatMap(\.options))
            for option in command.options where !shown.contains(option.long) {
                problems.append("\(command.name): no example shows --\(option.long)")
            }
        }
        return problems
    }

    static func invocationProblems(in line: String, allowedMistakes: Set<String>) -> [String] {
        var problems = [String]()
        for invocation in DevtrustInvocation.all(in: line) {
            guard let name = invocation.command else {
                for option in invocation.options where !globalNames.contains(option) && !allowedMistakes.contains(option) {
                    problems.append("--\(option) is not a global option: \(line)")
                }
                continue
            }
            guard let command = CommandSpecs.commands.first(where: { $0.name == name }) else { continue }
            let known = Set(command.options.map(\.long)).union(globalNames)
            for option in invocation.options where !known.contains(option) && !allowedMistakes.contains(option) {
                problems.append("\(name): --\(option) is not an option of \(name): \(line)")
            }
        }
        return problems
    }
}

// MARK: - Running the examples

struct RunnableExample {
    enum Kind {
        /// A ```console block: `$ command` lines, each followed by what it prints.
        case transcript(Transcript)
        /// A ```sh block: a script that must succeed.
        case script(String)
        /// `<!-- runnable: file NAME -->`: the block is a file later examples use.
        case file(name: String, contents: String)
    }

    let line: Int
    let kind: Kind
}

/// A terminal session as the guide shows it. `...` in a line stands for any
/// text; a line of only `...` for any number of lines. A command that fails
/// is followed by `$ echo $?` with its exit code.
struct Transcript {
    struct Step {
        let command: String
        let expected: [String]
        let line: Int
    }

    let steps: [Step]

    init(lines: [String], line first: Int) {
        var steps = [Step]()
        var index = 0
        while index < lines.count {
            guard lines[index].hasPrefix("$ ") else { index += 1; continue }
            let start = index
            var command = String(lines[index].dropFirst(2))
            while (command.hasSuffix("\\") || command.hasSuffix("|")) && index + 1 < lines.count {
                index += 1
                command += "\n" + lines[index]
            }
            index += 1
            var expected = [String]()
            while index < lines.count && !lines[index].hasPrefix("$ ") {
                expected.append(lines[index])
                index += 1
            }
            while expected.last == "" { expected.removeLast() }
            steps.append(Step(command: command, expected: expected, line: first + 1 + start))
        }
        self.steps = steps
    }

    static func matches(_ expected: [String], _ actual: [String]) -> Bool {
        var memo = [Int: Bool]()
        func match(_ e: Int, _ a: Int) -> Bool {
            let key = e * (actual.count + 1) + a
            if let known = memo[key] { return known }
            let result: Bool
            if e == expected.count {
                result = a == actual.count
            } else if expected[e] == "..." {
                result = match(e + 1, a) || (a < actual.count && match(e, a + 1))
            } else {
                result = a < actual.count && lineMatches(expected[e], actual[a]) && match(e + 1, a + 1)
            }
            memo[key] = result
            return result
        }
        return match(0, 0)
    }

    static func lineMatches(_ pattern: String, _ line: String) -> Bool {
        let parts = pattern.components(separatedBy: "...")
        guard parts.count > 1 else { return pattern == line }
        guard line.hasPrefix(parts[0]), line.dropFirst(parts[0].count).hasSuffix(parts[parts.count - 1]),
              line.count >= parts[0].count + parts[parts.count - 1].count else { return false }
        var rest = Substring(line.dropFirst(parts[0].count).dropLast(parts[parts.count - 1].count))
        for part in parts.dropFirst().dropLast() where !part.isEmpty {
            guard let range = rest.range(of: part) else { return false }
            rest = rest[range.upperBound...]
        }
        return true
    }
}

/// One user following the guide: a home directory (the keystore in its
/// default place), the binary on PATH, and the reference server (HTTPS with a
/// private CA) standing in for https://idp.example. Commands get the server's
/// real address; what they print gets the documented one back, and the home
/// directory as `~`.
final class ExampleSession {
    static let documentedServer = "https://idp.example"
    /// What the examples run besides devtrust (make test installs them; on CI their absence fails).
    static let tools = ["/usr/bin/curl", "/usr/bin/jq", "/usr/bin/openssl", "/usr/bin/basenc", "/bin/bash"]

    static var shouldRun: Bool {
        ExternalTool.isCI || (ReferenceServer.shouldRun && tools.allSatisfy { FileManager.default.isExecutableFile(atPath: $0) })
    }

    let directory = TemporaryDirectory("docs")
    let authority: TestCertificateAuthority
    let server: ReferenceServer
    var home: String { directory.file("home") }
    var work: String { directory.file("work") }

    init() throws {
        authority = try TestCertificateAuthority()
        // Registration ends with terms to accept (register --accept); device codes are approved at the second poll.
        server = try ReferenceServer(["--tls-cert", authority.serverCertificate, "--tls-key", authority.serverKey, "--terms-step",
                                      "--device-interval", "1", "--device-approve-after", "2",
                                      // A browser sent to the authorization URL comes back signed in (authorize-url, login --callback).
                                      "--browser-login", "approve"])
        for path in [home, work, directory.file("bin")] {
            try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        }
        try FileManager.default.createSymbolicLink(atPath: directory.file("bin/devtrust"), withDestinationPath: DevtrustBinary.defaultPath)
    }

    var environment: [String: String] {
        // As root, devtrust's default keystore is /var/lib/devtrust: name the one a user has. A TCTI
        // that opens nothing keeps the key in software, as the guide shows, on a machine with a TPM too.
        ["PATH": directory.file("bin") + ":/usr/bin:/bin", "HOME": home, "LANG": "C.UTF-8", "DEVTRUST_TCTI": "device:/nonexistent",
         "DEVTRUST_KEYSTORE": home + "/.local/share/devtrust", "XDG_CONFIG_HOME": home + "/.config", "XDG_CACHE_HOME": home + "/.cache",
         "XDG_DATA_HOME": home + "/.local/share", "DEVTRUST_CA_FILE": authority.caCertificate, "CURL_CA_BUNDLE": authority.caCertificate]
    }

    func toServer(_ text: String) -> String {
        text.replacingOccurrences(of: Self.documentedServer, with: server.url)
    }

    func documented(_ text: String) -> String {
        text.replacingOccurrences(of: server.url, with: Self.documentedServer).replacingOccurrences(of: home, with: "~")
    }

    /// What went wrong, if anything.
    func run(_ example: RunnableExample) throws -> [String] {
        switch example.kind {
        case .file(let name, let contents):
            directory.write(name.hasPrefix("~/") ? "home/" + name.dropFirst(2) : "work/" + name, toServer(contents))
            return []
        case .script(let script):
            let result = try bash("set -e\n" + toServer(script))
            return result.status == 0 ? [] : ["the script exited \(result.status):\n\(documented(result.stdout))"]
        case .transcript(let transcript):
            return try run(transcript)
        }
    }

    private func bash(_ script: String) throws -> ProcessResult {
        let path = directory.write("script.sh", "exec 2>&1\n" + script)
        return try ProcessRunner.run("/bin/bash", ["--noprofile", "--norc", path], environment: environment, currentDirectory: work)
    }

    /// Runs the steps in one shell, a marker with the previous step's exit code between them.
    private func run(_ transcript: Transcript) throws -> [String] {
        let marker = "\u{1E}"
        var script = ""
        for step in transcript.steps {
            script += "devtrust_status=$?; printf '\(marker)%d\\n' \"$devtrust_status\"; (exit \"$devtrust_status\")\n" + toServer(step.command) + "\n"
        }
        script += "printf '\(marker)%d\\n' \"$?\"\n"
        let result = try bash(script)
        var chunks = documented(result.stdout).components(separatedBy: marker).dropFirst()
        var problems = [String]()
        var statuses = [Int32]()
        var outputs = [[String]]()
        while let chunk = chunks.popFirst() {
            let status = Int32(chunk.prefix { $0.isNumber }) ?? -1
            statuses.append(status)
            var output = String(chunk.drop { $0.isNumber }.dropFirst())
            if output.hasSuffix("\n") { output.removeLast() }
            outputs.append(output.isEmpty ? [] : output.components(separatedBy: "\n"))
        }
        // statuses[k + 1] is step k's exit code; outputs[k] is what step k printed.
        guard outputs.count == transcript.steps.count + 1 else {
            return ["the transcript's shell stopped early: \(documented(result.stdout))"]
        }
        for (index, step) in transcript.steps.enumerated() {
            let printed = outputs[index]
            if !Transcript.matches(step.expected, printed) {
                problems.append("line \(step.line): `\(step.command)` printed\n\(printed.joined(separator: "\n"))\n--- the guide says\n"
                                + step.expected.joined(separator: "\n"))
            }
            let status = statuses[index + 1]
            let shown = index + 1 < transcript.steps.count && transcript.steps[index + 1].command == "echo $?"
            if status != 0 && !shown {
                problems.append("line \(step.line): `\(step.command)` exited \(status), and the guide does not show it with `echo $?`")
            }
        }
        return problems
    }
}
