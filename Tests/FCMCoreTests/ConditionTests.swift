import XCTest

@testable import FCMCore

/// Topic names and conditions: table-driven, plus the evaluator against a brute-force one.
final class ConditionTests: XCTestCase {
    func testTopicNames() {
        let cases: [(String, Bool)] = [
            ("news", true), ("a-b_c.d~e%f", true), ("A1", true), (String(repeating: "x", count: 900), true),
            ("", false), ("has space", false), ("a/b", false), ("ü", false), (String(repeating: "x", count: 901), false),
            ("a'b", false),
        ]
        for (name, ok) in cases { XCTAssertEqual(Topics.isValidName(name), ok, name) }
    }

    func testParseTable() {
        let ok: [(String, String)] = [
            ("'a' in topics", "'a' in topics"),
            ("'a' in topics && 'b' in topics", "('a' in topics && 'b' in topics)"),
            ("'a' in topics || 'b' in topics && 'c' in topics", "('a' in topics || ('b' in topics && 'c' in topics))"),
            ("('a' in topics || 'b' in topics) && 'c' in topics", "(('a' in topics || 'b' in topics) && 'c' in topics)"),
            ("  'a'   in   topics  ", "'a' in topics"),
            ("\"a\" in topics", "'a' in topics"),
            ("(('a' in topics))", "'a' in topics"),
            // The condition is case-insensitive (seeds Table 1), the keywords included.
            ("'a' IN TOPICS", "'a' in topics"),
            ("'a' In Topics && 'b' in tOpIcS", "('a' in topics && 'b' in topics)"),
        ]
        for (text, shape) in ok { XCTAssertEqual(Condition.parse(text)?.description, shape, text) }
        let bad = [
            "", "a in topics", "'a' in topic", "'a' in topicsX", "'a' intopics", "'a' in topics &&",
            "('a' in topics", "'a' in topics)", "'a' in topics & 'b' in topics", "'a' in topics && 'b' in topics && 'c' in topics && 'd' in topics",
            "'has space' in topics", "'' in topics", "'a' in topics 'b' in topics", "&& 'a' in topics", "'a' not in topics",
            "'a' IN TOPICSX", "'a' INTOPICS",
        ]
        for text in bad { XCTAssertNil(Condition.parse(text), text) }
        XCTAssertNotNil(Condition.parse("'a' in topics && 'b' in topics && 'c' in topics && 'd' in topics", maxOperators: 4))
        XCTAssertNil(Condition.parse("'a' in topics && 'b' in topics || 'c' in topics || 'd' in topics"), "three operators")
    }

    func testMatchingIsCaseInsensitive() throws {
        let c = try XCTUnwrap(Condition.parse("'News' in topics && 'SPORT' in topics"))
        XCTAssertTrue(c.matches([Topics.key("news"), Topics.key("sport")]))
        XCTAssertFalse(c.matches([Topics.key("news")]))
    }

    /// Random expressions over four topics and random subscription sets: the parser's tree, the
    /// set evaluator and a brute-force evaluator of the same text must agree.
    func testAgainstBruteForce() throws {
        var rng = SplitMix(seed: 42)
        let names = ["a", "b", "c", "d"]
        for _ in 0..<2000 {
            let (text, brute) = randomExpression(&rng, names: names, operators: Int(rng.next() % 5))
            let parsed = try XCTUnwrap(Condition.parse(text, maxOperators: 4), text)
            // 16 devices: device i is subscribed to the topics whose bit is set in i.
            var bySet = [String: Set<Int>]()
            for (bit, n) in names.enumerated() { bySet[n] = Set((0..<16).filter { $0 & (1 << bit) != 0 }) }
            let viaSets = parsed.evaluate { bySet[$0] ?? [] }
            for device in 0..<16 {
                let subscribed = Set(names.enumerated().filter { device & (1 << $0.offset) != 0 }.map(\.element))
                let want = brute(subscribed)
                XCTAssertEqual(parsed.matches(subscribed), want, "\(text) for \(subscribed)")
                XCTAssertEqual(viaSets.contains(device), want, "\(text) for \(subscribed) (sets)")
            }
        }
    }

    /// A random condition text and a direct evaluator for it (&& before ||, parentheses).
    func randomExpression(_ rng: inout SplitMix, names: [String], operators: Int) -> (String, (Set<String>) -> Bool) {
        // Build a flat list of terms and operators, optionally parenthesizing a run.
        if operators == 0 {
            let n = names[Int(rng.next() % UInt64(names.count))]
            let padded = rng.next() % 2 == 0 ? "'\(n)' in topics" : " '\(n)'  in topics "
            return (padded, { $0.contains(n) })
        }
        let leftOps = Int(rng.next() % UInt64(operators))
        let (lt, lf) = randomExpression(&rng, names: names, operators: leftOps)
        let (rt, rf) = randomExpression(&rng, names: names, operators: operators - 1 - leftOps)
        let isAnd = rng.next() % 2 == 0
        // Parenthesize both sides so the text means exactly this tree whatever the precedence.
        let text = "(\(lt)) \(isAnd ? "&&" : "||") (\(rt))"
        return (text, isAnd ? { lf($0) && rf($0) } : { lf($0) || rf($0) })
    }

    func testPrecedenceWithoutParentheses() throws {
        // a || b && c  ==  a || (b && c)
        let c = try XCTUnwrap(Condition.parse("'a' in topics || 'b' in topics && 'c' in topics"))
        XCTAssertTrue(c.matches(["a"]))
        XCTAssertFalse(c.matches(["b"]))
        XCTAssertTrue(c.matches(["b", "c"]))
    }
}

struct SplitMix {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9e37_79b9_7f4a_7c15
        var z = state
        z = (z ^ (z >> 30)) &* 0xbf58_476d_1ce4_e5b9
        z = (z ^ (z >> 27)) &* 0x94d0_49bb_1331_11eb
        return z ^ (z >> 31)
    }
}
