/// A start-up problem (a flag, a fixture file): said in one line, and the process exits.
public struct ConfigurationError: Error, Sendable, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}
