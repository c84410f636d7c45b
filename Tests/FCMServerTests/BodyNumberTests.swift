@testable import FCMModel
import XCTest

/// Whole numbers in control API bodies, however written: decided on the decimal digits.
final class BodyNumberTests: XCTestCase {
    func testWholeNumbersWrittenWithAFractionOrAnExponent() {
        let cases: [(String, Int64?)] = [
            ("3600.0", 3600), ("3.6e3", 3600), ("1e3", 1000), ("1E+3", 1000), ("-2.50e1", -25), ("0.0", 0), ("-0.0", 0),
            ("36000e-1", 3600), ("9223372036854775807.0", Int64.max),
            ("1.5", nil), ("3600.0000000000001", nil), ("0.05", nil), ("1e-400", nil), ("1e999999999", nil),
            ("9223372036854775808.0", nil), ("1e19", nil), ("4503599627370496.5", nil),
        ]
        for (text, expected) in cases {
            XCTAssertEqual(Body.whole(text), expected, text)
        }
    }
}
