"""Reconciler for generation steps (OpenAI chat completions, image generation).

A generation writes nothing anywhere else: its only product is the answer, which becomes the
receipt. If a run died after sending the request and before recording the answer, that answer
was never used downstream (every later step reads it from the receipt), so generating again is
safe. It costs tokens, which the job's budgets count.
"""

from .verdicts import Absent


class RegenerateReconciler:
    name = "regenerate"
    verifies = False

    def lookup(self, op):
        # Nothing is asked: the evidence says so (the console never words this as "absent at the remote").
        return Absent(True, {"reconciler": self.name, "not_asked": True,
                             "detail": f"{op.action} has no remote side effect; its unrecorded answer was never "
                                       "used, so generating again is safe"})

    def verify(self, op, remote_id):
        return True
