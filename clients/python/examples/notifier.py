"""A tiny app server: the code under test in this sample project. It knows nothing of the mock."""

from firebase_admin import messaging


def notify_order_shipped(app, fid: str, order_id: str) -> str:
    """Tells the customer's phone, by its Firebase installation id (firebase-admin 7.7 deprecates
    `Message.token` for `Message.fid`), that an order shipped; the message name FCM answered."""
    message = messaging.Message(
        fid=fid,
        data={"kind": "order_shipped", "order_id": order_id},
        notification=messaging.Notification(title="Your order shipped", body=f"Order {order_id} is on its way"),
        android=messaging.AndroidConfig(priority="high"),
    )
    return messaging.send(message, app=app)
