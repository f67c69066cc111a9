"""The 5.x user and ACL codes of mqadmin (createUser ... listAcl: AUTH_CREATE_USER 3001 to
AUTH_LIST_ACL 3010), answered as Java 5.3.3's ``AdminBrokerProcessor`` answers them.

A refusal by the metadata (:class:`rmqpy.auth.model.AuthError`) is NO_PERMISSION with Java's
message; a blank username INVALID_PARAMETER "The username is blank"; creating or changing a
Super user needs a Super user's AccessKey (SYSTEM_ERROR "The super user can only be create by
super user", as Java). Who may call these codes at all is authorization's business (Cluster
Update / Get, :mod:`rmqpy.auth.contexts`). On a broker without 5.x authentication the codes
answer SYSTEM_ERROR, as Java does without a metadata provider.

Unlike Java, a body that is not the JSON object expected is SYSTEM_ERROR with a one-line reason
(Java answers its NullPointerException or parse exception).
"""
from __future__ import annotations

from typing import Any, Callable

from twisted.logger import Logger

from rmqpy.auth.metadata import AuthMetadata
from rmqpy.auth.model import POLICY_TYPES, AuthError, Resource, User, acl_from_info, by_name, subject_user
from rmqpy.protocol import fastjson
from rmqpy.protocol.codes import RequestCode, ResponseCode
from rmqpy.protocol.command import RemotingCommand
from rmqpy.remoting.ratelimit import clip

AUTH_CREATE_USER, AUTH_UPDATE_USER, AUTH_DELETE_USER = RequestCode.AUTH_CREATE_USER, RequestCode.AUTH_UPDATE_USER, \
    RequestCode.AUTH_DELETE_USER
AUTH_GET_USER, AUTH_LIST_USER = RequestCode.AUTH_GET_USER, RequestCode.AUTH_LIST_USER
AUTH_CREATE_ACL, AUTH_UPDATE_ACL, AUTH_DELETE_ACL = RequestCode.AUTH_CREATE_ACL, RequestCode.AUTH_UPDATE_ACL, \
    RequestCode.AUTH_DELETE_ACL
AUTH_GET_ACL, AUTH_LIST_ACL = RequestCode.AUTH_GET_ACL, RequestCode.AUTH_LIST_ACL
SYSTEM_ERROR_REMARK = "An system error occurred, please try again later."


class BadBody(Exception):
    pass


def _object(body: bytes | None, what: str) -> dict[str, Any]:
    if not body:
        raise BadBody(f"The body of {what} is null")
    try:
        obj = fastjson.loads(body)
    except ValueError as exc:
        raise BadBody(f"The body of {what} is not JSON: {clip(str(exc))}") from None
    if not isinstance(obj, dict):
        raise BadBody(f"The body of {what} is not a JSON object")
    return obj


class AuthAdminProcessor:
    codes = tuple(range(int(AUTH_CREATE_USER), int(AUTH_LIST_ACL) + 1))
    log = Logger(namespace="rmqpy.auth")

    def __init__(self, metadata: Callable[[], AuthMetadata | None]) -> None:
        self.metadata = metadata

    def process_request(self, channel: Any, request: RemotingCommand) -> RemotingCommand:
        meta = self.metadata()
        if meta is None:
            return request.response(ResponseCode.SYSTEM_ERROR, SYSTEM_ERROR_REMARK)
        ext = request.ext_fields or {}
        handler = self._handlers[request.code]
        try:
            return handler(self, meta, request, ext)
        except AuthError as exc:
            self.log.info("auth admin code {code} from {peer} refused: {why}", code=request.code,
                          peer=channel.remote_address, why=clip(str(exc)))
            return request.response(ResponseCode.NO_PERMISSION, str(exc))
        except (BadBody, ValueError, TypeError, AttributeError) as exc:
            return request.response(ResponseCode.SYSTEM_ERROR, clip(str(exc)))
        except OSError as exc:
            self.log.error("auth admin code {code}: writing {path} failed: {err}", code=request.code,
                           path=meta.path, err=exc)
            return request.response(ResponseCode.SYSTEM_ERROR, SYSTEM_ERROR_REMARK)

    @staticmethod
    def _not_super_login(meta: AuthMetadata, ext: dict[str, str]) -> bool:
        ak = ext.get("AccessKey")
        if not ak:
            return False  # as Java: authentication may be off
        user = meta.users.get(ak)
        return user is None or not user.super

    # ------------------------------------------------------------------ users
    def _create_user(self, meta: AuthMetadata, request: RemotingCommand, ext: dict[str, str]) -> RemotingCommand:
        username = ext.get("username")
        if not username:
            return request.response(ResponseCode.INVALID_PARAMETER, "The username is blank")
        user = User.from_info(_object(request.body, "user"), username)
        if user.super and self._not_super_login(meta, ext):
            return request.response(ResponseCode.SYSTEM_ERROR, "The super user can only be create by super user")
        meta.create_user(user)
        return request.response()

    def _update_user(self, meta: AuthMetadata, request: RemotingCommand, ext: dict[str, str]) -> RemotingCommand:
        username = ext.get("username")
        if not username:
            return request.response(ResponseCode.INVALID_PARAMETER, "The username is blank")
        user = User.from_info(_object(request.body, "user"), username)
        if user.super and self._not_super_login(meta, ext):
            return request.response(ResponseCode.SYSTEM_ERROR, "The super user can only be update by super user")
        old = meta.get_user(username)
        if old is None:
            raise AuthError("The user is not exist", True)
        if old.super and self._not_super_login(meta, ext):
            raise AuthError("The super user can only be update by super user", True)
        meta.update_user(user)
        return request.response()

    def _delete_user(self, meta: AuthMetadata, request: RemotingCommand, ext: dict[str, str]) -> RemotingCommand:
        username = ext.get("username")
        old = meta.get_user(username)
        if old is not None:
            if old.super and self._not_super_login(meta, ext):
                raise AuthError("The super user can only be update by super user", True)
            meta.delete_user(old.username)
        return request.response()

    def _get_user(self, meta: AuthMetadata, request: RemotingCommand, ext: dict[str, str]) -> RemotingCommand:
        username = ext.get("username")
        if not username or not username.strip():
            return request.response(ResponseCode.INVALID_PARAMETER, "The username is blank")
        user = meta.get_user(username)
        response = request.response()
        if user is not None:
            response.body = fastjson.dumps(user.to_info()).encode("utf-8")
        return response

    def _list_user(self, meta: AuthMetadata, request: RemotingCommand, ext: dict[str, str]) -> RemotingCommand:
        users = meta.list_users(ext.get("filter"))
        response = request.response()
        if users:
            response.body = fastjson.dumps([u.to_info() for u in users]).encode("utf-8")
        return response

    # ------------------------------------------------------------------ ACLs
    def _create_acl(self, meta: AuthMetadata, request: RemotingCommand, ext: dict[str, str]) -> RemotingCommand:
        info = _object(request.body, "acl")
        if not info.get("policies"):
            return request.response(ResponseCode.SYSTEM_ERROR, "The body of acl is null")
        acl = acl_from_info(info)
        if not acl.subject:
            user = subject_user(ext.get("subject"))
            if user is None:
                return request.response(ResponseCode.SYSTEM_ERROR, SYSTEM_ERROR_REMARK)
            acl.subject = f"User:{user}"
        meta.create_or_update_acl(acl)
        return request.response()

    def _delete_acl(self, meta: AuthMetadata, request: RemotingCommand, ext: dict[str, str]) -> RemotingCommand:
        user = subject_user(ext.get("subject"))
        policy_type = by_name(POLICY_TYPES, ext.get("policyType"))
        meta.delete_acl(f"User:{user}" if user is not None else None, policy_type,
                        Resource.parse(ext.get("resource")))
        return request.response()

    def _get_acl(self, meta: AuthMetadata, request: RemotingCommand, ext: dict[str, str]) -> RemotingCommand:
        user = subject_user(ext.get("subject"))
        if user is None:
            return request.response(ResponseCode.SYSTEM_ERROR, SYSTEM_ERROR_REMARK)
        acl = meta.get_acl(f"User:{user}")
        response = request.response()
        if acl is not None:
            response.body = fastjson.dumps(acl.to_info()).encode("utf-8")
        return response

    def _list_acl(self, meta: AuthMetadata, request: RemotingCommand, ext: dict[str, str]) -> RemotingCommand:
        acls = meta.list_acls(ext.get("subjectFilter"), ext.get("resourceFilter"))
        response = request.response()
        if acls:
            response.body = fastjson.dumps(acls).encode("utf-8")
        return response

    _handlers: dict[int, Callable[..., RemotingCommand]] = {
        AUTH_CREATE_USER: _create_user, AUTH_UPDATE_USER: _update_user, AUTH_DELETE_USER: _delete_user,
        AUTH_GET_USER: _get_user, AUTH_LIST_USER: _list_user, AUTH_CREATE_ACL: _create_acl,
        AUTH_UPDATE_ACL: _create_acl, AUTH_DELETE_ACL: _delete_acl, AUTH_GET_ACL: _get_acl,
        AUTH_LIST_ACL: _list_acl,
    }
