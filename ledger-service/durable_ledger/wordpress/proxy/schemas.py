"""Request bodies of the publishing proxy (marshmallow)."""
from marshmallow import Schema, ValidationError, fields, validate, validates_schema

SEO_PLUGINS = ("rank_math", "yoast")


class SeoSchema(Schema):
    title = fields.Str(allow_none=True)
    description = fields.Str(allow_none=True)
    focus_keyword = fields.Str(allow_none=True)


class _Durable(Schema):
    """The identifiers every write carries through to WordPress."""

    # Both optional and only checked: the proxy forwards the ledger's job and token, not these.
    job_id = fields.Str(load_default=None, validate=validate.Length(min=1, max=191))
    fencing_token = fields.Int(load_default=None, allow_none=True, validate=validate.Range(min=0))


class DraftSchema(_Durable):
    operation_key = fields.Str(required=True, validate=validate.Length(min=1, max=191))
    title = fields.Str(required=True)
    content = fields.Str(load_default=None)
    excerpt = fields.Str(load_default=None)
    featured_media = fields.Int(load_default=None, allow_none=True)
    categories = fields.List(fields.Int(), load_default=None)
    tags = fields.List(fields.Int(), load_default=None)
    seo = fields.Nested(SeoSchema, load_default=None)
    seo_plugins = fields.List(fields.Str(validate=validate.OneOf(SEO_PLUGINS)), load_default=list(SEO_PLUGINS))
    status = fields.Str(load_default="draft", validate=validate.Equal(
        "draft", error="the proxy only creates drafts; publishing is a separate, approval-gated action"))


class MediaSchema(_Durable):
    operation_key = fields.Str(required=True, validate=validate.Length(min=1, max=191))
    filename = fields.Str(load_default=None)
    mime_type = fields.Str(load_default=None)
    url = fields.Str(load_default=None, validate=validate.Length(min=1, max=2048))  # checked by media.fetch_url
    content_base64 = fields.Str(load_default=None)
    alt_text = fields.Str(load_default=None)
    title = fields.Str(load_default=None)
    caption = fields.Str(load_default=None)
    description = fields.Str(load_default=None)


class SeoUpdateSchema(_Durable):
    operation_key = fields.Str(required=True, validate=validate.Length(min=1, max=191))
    seo = fields.Nested(SeoSchema, required=True)
    seo_plugins = fields.List(fields.Str(validate=validate.OneOf(SEO_PLUGINS)), load_default=list(SEO_PLUGINS))

    @validates_schema
    def _not_empty(self, data, **_kw):
        if not any(v is not None for v in data["seo"].values()):
            raise ValidationError("seo needs at least one of title, description, focus_keyword", "seo")


class ResourcePackSchema(Schema):
    html = fields.Str(required=True, validate=validate.Length(min=1))


class PostUpdateSchema(_Durable):
    """A fenced, verified update of an existing post. Sets values, never appends."""

    operation_key = fields.Str(required=True, validate=validate.Length(min=1, max=191))
    title = fields.Str(load_default=None)
    content = fields.Str(load_default=None)
    excerpt = fields.Str(load_default=None)
    featured_media = fields.Int(load_default=None, allow_none=True)
    resource_pack = fields.Nested(ResourcePackSchema, load_default=None)

    @validates_schema
    def _pack_needs_base(self, data, **_kw):
        if data.get("resource_pack") is not None:
            if data.get("content") is None:
                raise ValidationError("resource_pack needs content: the article body it is appended to", "content")
            if not data.get("operation_key"):
                raise ValidationError("resource_pack needs the operation_key it is bound to", "operation_key")
        if not any(data.get(k) is not None for k in ("title", "content", "excerpt", "featured_media")):
            raise ValidationError("nothing to update: give title, content, excerpt or featured_media", "_schema")


class PublishSchema(_Durable):
    """What the approver approved: the content digest (sha256 of the stored raw content), and
    optionally the title and featured image; all checked against the post before publishing."""

    operation_key = fields.Str(required=True, validate=validate.Length(min=1, max=191))
    content_sha256 = fields.Str(required=True, validate=validate.Regexp(r"^[0-9a-f]{64}$"))
    title = fields.Str(load_default=None)
    featured_media = fields.Int(load_default=None)
