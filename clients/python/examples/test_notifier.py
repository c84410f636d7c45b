"""A sample project's test: the app server sends with firebase-admin through firebase_app(), the
test asserts on what the phone received with wait_for_messages. The fcm_mock fixture comes from
the plugin (pip install ./clients/python); nothing else is set up."""

from notifier import notify_order_shipped


def test_order_shipped_reaches_the_phone(fcm_mock):
    app = fcm_mock.firebase_app()
    phone = fcm_mock.device("demo-android-1")
    name = notify_order_shipped(app, phone.fid, "A-1001")

    [message] = fcm_mock.wait_for_messages(token="demo-android-1", count=1, timeout=5)
    assert name.endswith(message.message_id)
    assert message.transport == "http_v1"
    assert message.data == {"kind": "order_shipped", "order_id": "A-1001"}
    assert message.notification["title"] == "Your order shipped"
    assert message.effective["priority"] == "high"


def test_nothing_reaches_another_phone(fcm_mock):
    notify_order_shipped(fcm_mock.firebase_app(), fcm_mock.device("demo-android-1").fid, "A-1002")
    fcm_mock.assert_delivered("demo-android-1", where={"order_id": "A-1002"})
    fcm_mock.assert_no_messages("demo-android-2", within=0.2)
