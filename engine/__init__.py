"""Face Fusion engine: detects, aligns, swaps, colour-matches and super-resolves faces, writes EXRs.

Runs in its own Python environment; never imports bpy.
"""

import os

# OpenCV's worker threads spin after every parallel call (even a 64x64 warp) before they sleep. The engine
# alternates small OpenCV calls with model runs on the same cores, so the spin took the models' CPU: on 2 cores the
# walkers clip's follower took 92/86 CPU ms per 1080p frame with it, 76/72 without, same wall time (bench/RESULTS.md).
# OpenCV reads this when it is imported: set here, before any engine module imports cv2.
os.environ.setdefault("OPENCV_THREAD_POOL_ACTIVE_WAIT_WORKER", "0")
# The engine runs frames side by side (engine.render_pool): numpy's BLAS and any OpenMP library run one thread each,
# or N workers start N x cores threads. Read when those libraries load: set before any engine module imports numpy.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

# Raise with every change to the pixels a render makes: it is part of each output folder's cache key
# (engine/cachekey.py), so a bake never resumes into frames an earlier engine made. 0.2.0: issue 10's compositing;
# 0.3.0: large blurs on a shrunk copy (engine/stages/blur.py), Lab in float32 (within 1e-3 of 0.2.0's pixels).
# 0.4.0: the zone keeps the plate's side light (lighting.relight), the plate's brows are not handed inward (blend).
# 0.5.0: a frontal face's zone takes the mean of the plate's shading where both sides agree (face_symmetry.facing).
# 0.6.0: the mouth's openness is held along the track (track_models.MOUTH_HOLD).
# 0.7.0: a source eye's surround (liner, lashes) is face in the source region (source_region._eye_surround).
# 0.8.0: the eyes between the lids keep the swap's own colour (face_symmetry.eye_openings).
# 0.10.0 (0.9.0 was a reverted build): the face is blurred at most as far as the plate's eyes and brows are soft
# and its skin's texture turned down for the rest (engine.stages.resolution); in the shape zone the plate's colour
# is taken from its skin away from highlights (lighting.diffuse_base).
# 0.11.0: a small patch of the face's own feature colours beside an eye is not an occluder
# (occlusion_classic._own_features_out).
# 0.12.0: on a still, a small face the mesh does not flag needs a stronger detection
# (face_follow.FollowOptions.lone_detection_score).
# 0.13.0: the target crop whose pixels go back into the frame, and the source's crop and warp, are cut bicubic held
# to the local range (align.held_cubic); the models' crops and the paste back stay bilinear.
# 0.14.0: where MediaPipe's eye-contour model reads an eye more closed than the mesh, its lids replace the mesh's
# (landmarks_iris: blinks and lowered lids follow the target).
# 0.15.0: the lids are placed once per kept track sample, after the follower (bridged frames between two samples
# follow the mesh's own lids).
# 0.16.0: with several source photos, the geometric swap paints each face with the photo whose head turn is nearest
# its own, cross-faded between two (sources.SourceViews); one photo renders as before, bit for bit.
# 0.17.0: the skin takes the plate's own fine texture at the paste (stages.plate_texture); a source photo's glasses
# frame is filled in from its skin before the swap (stages.source_glasses).
# 0.18.0: no grain is fitted to a plate whose grain is under one 8-bit code value (detail_match.GRAIN_MIN).
# 0.19.0: expression lines from the plate by default (creases; a bearded source's shadow with them), the watermark in
# whole blocks on wide faces, the pasted face's level capped near the plate's (stages.level_cap).
__version__ = "0.19.0"
PROTOCOL_VERSION = 1
