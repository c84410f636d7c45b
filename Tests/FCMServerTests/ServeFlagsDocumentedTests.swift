import FCMServer
import Foundation
import XCTest

/// docs/cli.md names every flag of `serve` the other way round from DocumentedFlagsTests: each
/// row of `Configuration.options` (the table parsing and help read) is in the synopsis and named
/// under `## serve`, and its environment variable is in the variables' table
/// beside its flag. A flag added to the table and forgotten in the page fails here
/// (`--apns-environment` and two variables once were).
final class ServeFlagsDocumentedTests: XCTestCase {
    func testEveryServeFlagAndVariableIsInCLIMarkdown() throws {
        let page = try String(contentsOf: DocumentedFlagsTests.root.appendingPathComponent("docs/cli.md"), encoding: .utf8)
        let lines = page.components(separatedBy: "\n")
        let start = try XCTUnwrap(lines.firstIndex { $0.hasPrefix("fcm-mock serve ") })
        let synopsis = lines[start...].prefix { !$0.hasPrefix("fcm-mock cert") }.joined(separator: "\n")
        let section = try XCTUnwrap(page.components(separatedBy: "\n## serve\n").last?.components(separatedBy: "\n## Environment variables").first)
        let tableRows = lines.filter { $0.hasPrefix("| `FCM_MOCK_") }
        var missing: [String] = []
        for o in Configuration.options {
            if !synopsis.contains("[\(o.flag)") && !synopsis.contains(" \(o.flag) ") { missing.append("\(o.flag): not in the synopsis") }
            if section.range(of: o.flag + #"(?![a-z-])"#, options: .regularExpression) == nil {
                missing.append("\(o.flag): not named under ## serve")
            }
            if let variable = o.environment,
               !tableRows.contains(where: { $0.contains("`\(variable)`") && $0.contains("`\(o.flag)`") }) {
                missing.append("\(variable): no row of the variables' table names it with \(o.flag)")
            }
        }
        XCTAssertEqual(missing, [], missing.joined(separator: "\n"))
    }
}
