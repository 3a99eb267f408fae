"""Ordered phases per pipeline. A checkpoint may repeat or go back, never skip ahead."""

ARTICLE_PHASES = (
    "SOURCES_COLLECTED",
    "BODY_GENERATED",
    "QA_PASSED",
    "IMAGES_READY",
    "MEDIA_UPLOADED",
    "DRAFT_CONFIRMED",
    "SEO_VERIFIED",
    "AWAITING_APPROVAL",
    "PUBLISHED",
)

PIPELINES = {"article": ARTICLE_PHASES}


def phases_for(job):
    """The ordered phases of the job, or None for a generic (free-form) job."""
    if job.phases:
        return tuple(job.phases)
    return PIPELINES.get(job.pipeline)
