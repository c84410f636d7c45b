"""fcm-mock from Python: start or connect to the mock, set up devices, faults and APNs
credentials, send through firebase-admin, an APNs client or a Web Push library, and assert on
what devices received, waiting with the server's long polls; follow real receiving clients
(Firefox, Chromium, firebase-messaging: `clients()`, `Device.client`, `Message.client_delivery`).

    from fcm_mock import FcmMock

    with FcmMock.start() as mock:
        app = mock.firebase_app()
        ...
        mock.assert_delivered("demo-android-1", where={"score": "3x1"})

The pytest plugin (loaded on install) gives the fixtures `fcm_mock` (reset before each test)
and `fcm_mock_server` (one server for the session).
"""

from ._client import EventStream, FcmMock, find_binary
from ._records import (AccessToken, ApnsCertificate, ApnsCertificateInfo, ApnsKey, ApnsKeyInfo, ApnsMessage,
                       ApnsTeam, ClientAck, ClientCheckin, ClientConnection, ClientDelivery, ClientRegistration,
                       ClientRejection, Clock, Device, DeviceClient, Event, Fault, Group, IssuedAccessToken, Message,
                       MessageRecord, Project, ProjectApp, RealClient, Recipient, ServiceAccount, Stats,
                       StatsSeries, Topic, UpstreamMessage, WebPushMessage, XmppConnection, endpoint_id)
from .errors import (ConnectionFailed, ConnectTimedOut, ControlAPIError, FcmMockError, RequestTimedOut,
                     TransportError)

__all__ = ["FcmMock", "find_binary", "Device", "Fault", "Message", "ApnsMessage", "WebPushMessage",
           "ApnsKey", "ApnsCertificate", "RealClient", "ClientConnection", "ClientCheckin",
           "ClientRegistration", "DeviceClient", "ClientDelivery", "ClientAck", "ClientRejection",
           "Project", "ProjectApp", "ServiceAccount", "AccessToken", "MessageRecord", "Recipient",
           "Topic", "Group", "Clock", "XmppConnection", "UpstreamMessage",
           "ApnsKeyInfo", "ApnsTeam", "ApnsCertificateInfo", "IssuedAccessToken", "Stats", "StatsSeries",
           "Event", "EventStream", "endpoint_id", "ControlAPIError", "FcmMockError", "TransportError",
           "ConnectionFailed", "RequestTimedOut", "ConnectTimedOut"]
__version__ = "0.1.0"
