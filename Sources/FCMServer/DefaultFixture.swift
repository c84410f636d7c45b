/// The bundled default fixture, built into the binary so `fcm-mock serve` works from any folder.
/// `fixtures/default.json` holds the same text (a test keeps the two equal).
public let defaultFixtureJSON = #"""
{
  "projects": [
    {
      "sender_id": "123456789012",
      "server_keys": ["AAAAfcmmock:demo-server-key"],
      "apps": [
        {"app": "com.example.demo", "platform": "android"},
        {"app": "com.example.demo.ios", "platform": "ios", "apns_credential": "valid"}
      ]
    }
  ],
  "devices": [
    {"token": "demo-android-1", "sender_id": "123456789012", "app": "com.example.demo", "platform": "android", "online": true},
    {"token": "demo-android-2", "sender_id": "123456789012", "app": "com.example.demo", "platform": "android", "online": true},
    {"token": "demo-ios-1", "sender_id": "123456789012", "app": "com.example.demo.ios", "platform": "ios", "online": true},
    {"token": "demo-android-offline", "sender_id": "123456789012", "app": "com.example.demo", "platform": "android", "online": false}
  ]
}

"""#
