import FCMCore

// Shared by the JSONTests files.

// Short builders keep the expectation tables readable.
func num(_ text: String) -> JSONValue { .number(JSONNumber(text: text)) }
func str(_ s: String) -> JSONValue { .string(s) }
func arr(_ elements: JSONValue...) -> JSONValue { .array(elements) }
func obj(_ members: (String, JSONValue)...) -> JSONValue { .object(JSONObject(members)) }

func bytes(_ s: String) -> [UInt8] { Array(s.utf8) }

/// SplitMix64: deterministic, so a fuzz failure can be replayed from its iteration number.
struct SplitMix64 {
    var state: UInt64
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
    mutating func below(_ n: Int) -> Int { Int(next() % UInt64(n)) }
}
