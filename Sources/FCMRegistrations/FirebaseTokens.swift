import FCMCore
import FCMModel

/// The tokens of a Firebase installation, in Google's form: an opaque refresh token (`3_` and
/// 60 base64url characters) and an auth token that looks like a JWT (`eyJ` and 180), which lives
/// a week (`expiresIn: "604800s"`).
enum FirebaseTokens {
    /// Seconds an auth token lives.
    static let authSeconds: Int64 = 604_800

    /// New tokens for an installation made or refreshed (a refresh keeps its refresh token).
    static func new() -> InstallationTokens {
        var rng = SystemRandomNumberGenerator()
        return InstallationTokens(refresh: "3_" + randomString(60, from: RandomAlphabet.base64URL, using: &rng),
                                  auth: "eyJ" + randomString(180, from: RandomAlphabet.base64URL, using: &rng), authSeconds: authSeconds)
    }
}
