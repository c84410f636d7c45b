import XCTest
import FCMCore

extension JSONTests {

    // MARK: Never crash

    func testRandomInputsNeverCrash() {
        var rng = SplitMix64(state: 0x5EED)
        let seeds: [[UInt8]] = [
            #"{"to":"abc:DEF-123_xyz","priority":"high","time_to_live":3600,"data":{"a":"1"},"notification":{"title":"Hello","body":"World"}}"#,
            #"[1,-2.5e+3,true,false,null,"s\u00e9\ud83d\ude00\n",{},[],{"k":[{"x":0}]}]"#,
            "\"é€😀 long string that crosses several eight byte words\"",
            "-0.0e-0",
        ].map { Array($0.utf8) }
        // Bytes that matter to the grammar show up more often than pure noise would give them.
        let interesting: [UInt8] = Array(#"{}[]:,"\/ubfnrt0123456789-+.eEaAlsx "#.utf8)
            + [0x00, 0x09, 0x0A, 0x1F, 0x7F, 0x80, 0xBF, 0xC0, 0xC3, 0xE2, 0xED, 0xEF, 0xF0, 0xF4, 0xF5, 0xFF]
        func randomByte() -> UInt8 {
            rng.below(3) == 0 ? UInt8(truncatingIfNeeded: rng.next()) : interesting[rng.below(interesting.count)]
        }
        var accepted = 0
        var rejected = 0
        func check(_ input: [UInt8]) {
            do {
                let value = try JSONParser.parse(input, maxDepth: 8)
                accepted += 1
                // Whatever is accepted must survive a round trip unchanged.
                XCTAssertEqual(try JSONParser.parse(value.serialized(), maxDepth: 8), value)
            } catch {
                rejected += 1
                XCTAssertTrue((0...input.count).contains(error.offset), "offset \(error.offset) out of range")
                XCTAssertFalse(error.message.isEmpty)
            }
        }
        for _ in 0..<10_000 {
            check((0..<rng.below(40)).map { _ in randomByte() })
        }
        for _ in 0..<20_000 {
            var input = seeds[rng.below(seeds.count)]
            for _ in 0..<(1 + rng.below(3)) {
                let position = rng.below(input.count + 1)
                switch rng.below(4) {
                case 0: input.insert(randomByte(), at: position)
                case 1 where position < input.count: input.remove(at: position)
                case 2 where position < input.count: input[position] = randomByte()
                default: input = Array(input[..<position])
                }
            }
            check(input)
        }
        XCTAssertGreaterThan(accepted, 0)
        XCTAssertGreaterThan(rejected, 0)
    }
}
