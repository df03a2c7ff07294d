/// The `Date` header (RFC 9110 section 5.6.7): IMF-fixdate, and the obsolete
/// RFC 850 and asctime forms a recipient must also accept. Read without the
/// C library's locale-dependent parsers.
public enum HTTPDate {
    static let months = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]

    /// Seconds since the epoch, or nil when the text is none of the three forms.
    public static func parse(_ text: String) -> Int64? {
        let words = text.split(whereSeparator: { $0 == " " || $0 == "\t" }).map(String.init)
        // "Sun, 06 Nov 1994 08:49:37 GMT"
        if words.count == 6, words[0].hasSuffix(","), words[5] == "GMT",
           let day = Int(words[1]), words[1].count == 2, let month = month(words[2]), let year = Int(words[3]), words[3].count == 4 {
            return seconds(year: year, month: month, day: day, time: words[4])
        }
        // "Sunday, 06-Nov-94 08:49:37 GMT": a two-digit year below 70 is 20xx, else 19xx (a fixed pivot,
        // not RFC 9110's "more than 50 years ahead" rule, which needs today's date; the form is obsolete).
        if words.count == 4, words[0].hasSuffix(","), words[3] == "GMT" {
            let parts = words[1].split(separator: "-", omittingEmptySubsequences: false)
            guard parts.count == 3, parts[0].count == 2, parts[2].count == 2, let day = Int(parts[0]), let month = month(String(parts[1])),
                  let shortYear = Int(parts[2]) else { return nil }
            return seconds(year: shortYear < 70 ? 2000 + shortYear : 1900 + shortYear, month: month, day: day, time: words[2])
        }
        // "Sun Nov  6 08:49:37 1994"
        if words.count == 5, let month = month(words[1]), let day = Int(words[2]), let year = Int(words[4]), words[4].count == 4 {
            return seconds(year: year, month: month, day: day, time: words[3])
        }
        return nil
    }

    private static func month(_ text: String) -> Int? {
        guard text.count == 3, let index = months.firstIndex(of: text.lowercased()) else { return nil }
        return index + 1
    }

    private static func seconds(year: Int, month: Int, day: Int, time: String) -> Int64? {
        let clock = time.split(separator: ":", omittingEmptySubsequences: false)
        guard clock.count == 3, clock.allSatisfy({ $0.count == 2 }), let hour = Int(clock[0]), let minute = Int(clock[1]), let second = Int(clock[2]),
              (0...23).contains(hour), (0...59).contains(minute), (0...60).contains(second), (1...31).contains(day), (1...9999).contains(year) else { return nil }
        // Days from civil (Howard Hinnant's algorithm), proleptic Gregorian.
        let y = month <= 2 ? year - 1 : year
        let era = y / 400
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        let days = Int64(era * 146_097 + dayOfEra - 719_468)
        return days * 86_400 + Int64(hour * 3600 + minute * 60 + second)
    }
}
