import RoomKit
import FCMEngine
/// The bundled default fixture, built into the binary so `fcm-mock serve` works from any folder.
/// Its one copy is `fixtures/default.json`; `Resources/default-fixture.json` is a symbolic link to
/// it, embedded at build time (`PackageResources`).
public let defaultFixtureJSON = String(decoding: PackageResources.default_fixture_json, as: UTF8.self)
