"""Training-loop components registered in mmengine's registries."""
from .plain_param_groups import PlainParamGroupsHook

__all__ = ['PlainParamGroupsHook']
