"""Request bodies of the publishing proxy (marshmallow)."""
from marshmallow import Schema, fields, validate, validates_schema, ValidationError

SEO_PLUGINS = ("rank_math", "yoast")


class SeoSchema(Schema):
    title = fields.Str(allow_none=True)
    description = fields.Str(allow_none=True)
    focus_keyword = fields.Str(allow_none=True)


class _Durable(Schema):
    """The identifiers every write carries through to WordPress."""

    job_id = fields.Str(required=True, validate=validate.Length(min=1, max=191))
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
    url = fields.Url(load_default=None, schemes={"http", "https"}, require_tld=False)
    content_base64 = fields.Str(load_default=None)
    alt_text = fields.Str(load_default=None)
    title = fields.Str(load_default=None)
    caption = fields.Str(load_default=None)
    description = fields.Str(load_default=None)


class SeoUpdateSchema(_Durable):
    operation_key = fields.Str(load_default=None)
    seo = fields.Nested(SeoSchema, required=True)
    seo_plugins = fields.List(fields.Str(validate=validate.OneOf(SEO_PLUGINS)), load_default=list(SEO_PLUGINS))

    @validates_schema
    def _not_empty(self, data, **_kw):
        if not any(v is not None for v in data["seo"].values()):
            raise ValidationError("seo needs at least one of title, description, focus_keyword", "seo")
