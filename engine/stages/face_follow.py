"""Face tracks over one plate: detection on key frames, the mesh following each face between them, short losses
bridged, so a visible face is never dropped for a few frames. The records are in ``engine.stages.face_tracks``.

Per shot, frame by frame in order:
- every track seen on the previous frame is followed by the mesh from its 468 points (MediaPipe's own video mode:
  the region comes from the previous landmarks), moved on by the face's last step, since the mesh regresses a face
  centred in its region and lags a fast one;
- key frames (absolute frame numbers ``f % key_interval == 0``, plus every shot start, so a chunked render sees the
  same key frames) run the detector; detections go to tracks by IoU (sizes must agree: in a crowd a neighbour's
  face overlaps), and for a track lost a few frames ago by centre distance. A followed mesh that disagrees with
  its detection (drift) is re-fitted from the detection; detections no track claims start new tracks, which are
  followed back to the last key frame (a face that came into view in between is not missing there);
- off key frames, a track the mesh lost, or follows with a low score, is checked by the detector run on a crop
  around it (one detector pass on a small region, not the whole frame); a low-score mesh at most every
  ``check_interval`` frames, a track lost for a while only after 1, 2, 4 and 8 missed frames (the crop checks
  were most of the analysis's time at 1080p, and a face that left the frame was searched for on every frame);
- a track with no measurement for at most ``bridge.max_gap`` frames is bridged when it is measured again (optical
  flow forward and backward, ``engine.stages.track_bridge``); a longer loss ends it. No track crosses a cut.
False positives (coats of arms, backs of heads) get detections but not the mesh's face flag: a track needs
``min_face_frames`` frames the mesh scored as a face; a small face, whose flag is low even when it is one, needs
consistent detector and mesh scores over its frames (``_is_face``).

Results depend only on the shot's frames: analyse whole shots (the shot analysis runs over the whole plate).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from engine.stages.contracts import Face, kps5_from_68
from engine.stages.detect_blazeface import iou_matrix
from engine.stages.face_tracks import FaceSample, FaceTrack, ShotFaces, Source, box_size, mesh_box
from engine.stages.landmarks_mesh468 import MeshResult, to_68
from engine.stages.shot_cuts import detect_cuts
from engine.stages.track_bridge import BridgeSettings, bridge_gap

MAX_SIZE_RATIO = 1.5  # a detection more than this much larger or smaller than a track's box is another face


@dataclass(frozen=True)
class FollowOptions:
    key_interval: int = 6  # detector every K absolute frames (and at every shot start)
    mesh_score: float = 0.5  # mesh face score that counts as a face
    sure_score: float = 0.9  # under this a followed mesh is checked against a detection near it ...
    # ... at most every this many frames: a mesh sliding off a face loses its score over several frames, and the
    # check is most of the analysis's cost at 1080p (many small faces score under sure_score on every frame)
    check_interval: int = 2
    match_iou: float = 0.3  # detection <-> track association
    drift_iou: float = 0.5  # followed box vs its detection under this: re-fit from the detection
    duplicate_iou: float = 0.5  # two tracks overlapping this much are one face: the younger one ends
    min_face_frames: int = 3  # track consistency: frames the mesh scored as a face, else a false positive
    small_face: float = 64.0  # px: under this the mesh's face flag says little (a blurred 192 px crop)
    detection_score: float = 0.5  # a small face's median detector score over its detections to count as a face
    # ... and its median mesh face score: blurred in the mesh's crop, a small face scores far under mesh_score, but
    # still an order of magnitude above lettering, coats of arms and backs of heads (bench/QUALITY.md, 'Where the
    # constants came from')
    small_mesh_score: float = 0.002
    # ... and on a plate too short for a run of detections (a still, a two-frame plate) its one or two detections
    # must score this: lone detections that never came back (lettering, a sleeve, a bag) score just under it
    lone_detection_score: float = 0.6
    max_speed: float = 0.4  # face sizes per frame a lost face may have moved when it is found again
    search_scale: float = 3.0  # side of the re-anchoring crop, in face sizes
    bridge: BridgeSettings = field(default_factory=BridgeSettings)
    fail_frames: frozenset[int] = frozenset()  # test hook: detector and mesh see nothing on these frames


@dataclass
class _Live:
    track_id: int
    measured: dict[int, FaceSample]
    points: np.ndarray  # last measured 468 points (mesh input for the next frame)
    last: int
    face_frames: int = 0
    ended: bool = False
    det_scores: list[float] = field(default_factory=list)  # of the detections it was given
    mesh_scores: list[float] = field(default_factory=list)  # of every mesh fitted to it
    checked: int = -(1 << 30)  # the last frame a detection was matched to it


def key_frames(frames: Sequence[int], shot_starts: Sequence[int], interval: int) -> list[int]:
    """The frames the detector runs on: every ``interval`` absolute frames and every shot start."""
    starts = set(shot_starts)
    return [f for f in frames if f % interval == 0 or f in starts]


def _sample(frame: int, res: MeshResult, source: Source, confidence: float, box: np.ndarray | None = None
            ) -> FaceSample:
    lm68 = to_68(res.points)
    return FaceSample(frame, mesh_box(res.points) if box is None else np.asarray(box, np.float64),
                      kps5_from_68(lm68), lm68, res.points, float(np.clip(confidence, 0.0, 1.0)), source)


class _ShotFollower:
    """The per-frame state machine of one shot."""

    def __init__(self, detector: Any, landmarker: Any, opt: FollowOptions, next_id: int) -> None:
        self.det, self.mesh, self.opt = detector, landmarker, opt
        self.live: list[_Live] = []
        self.done: list[_Live] = []
        self.next_id = next_id
        self.recent: dict[int, np.ndarray] = {}  # the last frames, for bridging gaps once they close

    def _detect_near(self, im: np.ndarray, box: np.ndarray) -> list[Face]:
        """Detections in a square crop around a face box, in frame pixels."""
        h, w = im.shape[:2]
        half = self.opt.search_scale * box_size(box) / 2
        cx, cy = (box[0] + box[2]) / 2, (box[1] + box[3]) / 2
        x0, y0 = int(max(0, cx - half)), int(max(0, cy - half))
        x1, y1 = int(min(w, cx + half)), int(min(h, cy + half))
        if x1 - x0 < 16 or y1 - y0 < 16:
            return []
        faces = self.det.detect(np.ascontiguousarray(im[y0:y1, x0:x1]))
        for f in faces:
            f.box = f.box + np.array([x0, y0, x0, y0], np.float64)
            if f.kps5 is not None:
                f.kps5 = f.kps5 + np.array([x0, y0], np.float64)
        return faces

    def _measure(self, t: _Live, s: FaceSample, res: MeshResult | None) -> None:
        gap = s.frame - t.last - 1
        if 0 < gap <= self.opt.bridge.max_gap:
            self._bridge(t, s)
        t.measured[s.frame] = s
        t.last = s.frame
        if res is not None:
            t.points = res.points
            t.face_frames += int(res.score >= self.opt.mesh_score)
            t.mesh_scores.append(res.score)

    def _bridge(self, t: _Live, s: FaceSample) -> None:
        a = t.measured[t.last]
        filled = bridge_gap(self.recent.__getitem__, a.frame, a.landmarks68, s.frame, s.landmarks68,
                            self.opt.bridge)
        n = s.frame - a.frame
        for k, (lm68, _method, support) in enumerate(filled, start=1):
            # the box goes straight from one end's to the other's: the points of a face the mesh did not flag (its
            # detection box is the measurement) are too rough to carry a box; confidence falls towards the middle
            w = k / n
            box = (1.0 - w) * a.box + w * s.box
            # support: the fraction of points optical flow followed (0 where the motion was interpolated)
            conf = min(a.confidence, s.confidence) * (1.0 - min(k, n - k) / n) * (0.5 + 0.5 * support)
            t.measured[a.frame + k] = FaceSample(a.frame + k, box, kps5_from_68(lm68), lm68, None,
                                                 float(conf), Source.BRIDGED)

    def step(self, f: int, im: np.ndarray, key: bool) -> None:
        opt = self.opt
        self.recent[f] = im
        for old in [k for k in self.recent if k < f - opt.bridge.max_gap - 1]:
            del self.recent[old]
        for t in self.live:
            if f - t.last > opt.bridge.max_gap + 1:
                t.ended = True
        self.done += [t for t in self.live if t.ended]
        self.live = [t for t in self.live if not t.ended]
        failed = f in opt.fail_frames
        followed: dict[int, MeshResult] = {}
        if not failed:
            # only from the previous frame's points: after a gap the face has moved away from the old region and a
            # mesh fitted there can score as a face while sitting an eye distance off; a detection re-anchors it
            for t in self.live:
                if t.last != f - 1:
                    continue
                r = self.mesh.track(im, self._ahead(t))
                if r.score >= opt.mesh_score:
                    followed[t.track_id] = r
        if failed:
            dets: list[Face] = []
        elif key:
            dets = self.det.detect(im)
        else:  # re-anchor the faces the mesh lost or is unsure of, from a detection near where they were
            dets = []
            for t in self.live:
                r = followed.get(t.track_id)
                if r is None:
                    missed = f - t.last - 1
                    if missed & (missed - 1):  # lost for a while: look again after 1, 2, 4, 8 missed frames only
                        continue  # (key frames search everywhere; most lost tracks are faces that left)
                    ahead, last = self._predict(t, f), t.measured[t.last].box
                    near = self._detect_near(im, ahead)
                    if not near and iou_matrix(ahead[None], last[None])[0, 0] < 0.5:  # else the same crop again
                        near = self._detect_near(im, last)
                    dets += near
                elif r.score < opt.sure_score and f - t.checked >= opt.check_interval:
                    # a mesh sliding off the face loses its score first
                    dets += self._detect_near(im, mesh_box(r.points))
        # the boxes each track claims detections with: where the mesh followed it, else where it was last seen and
        # where its velocity would have taken it
        claim = [mesh_box(followed[t.track_id].points) if t.track_id in followed else t.measured[t.last].box
                 for t in self.live]
        moved = [mesh_box(followed[t.track_id].points) if t.track_id in followed else self._predict(t, f)
                 for t in self.live]
        taken: set[int] = set()
        matched: set[int] = set()
        for ti, di in self._pairs(f, dets, claim, moved):
            if ti in matched or di in taken:
                continue
            matched.add(ti)
            taken.add(di)
            t, d = self.live[ti], dets[di]
            t.det_scores.append(d.score)
            t.checked = f
            r = followed.pop(t.track_id, None)
            if r is not None and iou_matrix(mesh_box(r.points)[None], d.box[None])[0, 0] >= opt.drift_iou:
                self._measure(t, _sample(f, r, Source.DETECTED, r.score), r)
                continue
            r = self.mesh.fit_face(im, d)
            if self._agrees(r, d):
                self._measure(t, _sample(f, r, Source.DETECTED, r.score), r)
            else:  # a face the mesh does not flag (small, near profile): the detection's box, half its confidence
                self._measure(t, _sample(f, r, Source.DETECTED, 0.5 * d.score, d.box), r)
        for ti, t in enumerate(self.live):
            if ti not in matched and t.track_id in followed:
                r = followed[t.track_id]
                self._measure(t, _sample(f, r, Source.TRACKED, r.score), r)
        if key:
            self._start_tracks(f, im, [d for i, d in enumerate(dets) if i not in taken])
        self._merge_duplicates(f)

    def _pairs(self, f: int, dets: list[Face], claim: list[np.ndarray], moved: list[np.ndarray]
               ) -> list[tuple[int, int]]:
        """(track, detection) candidates, best first: by IoU, then, for a track seen frames ago, by centre distance
        (a face moving across the frame leaves its old box within a few frames; the size must agree)."""
        if not dets or not self.live:
            return []
        boxes = np.stack([d.box for d in dets])
        iou = np.maximum(iou_matrix(np.stack(claim), boxes), iou_matrix(np.stack(moved), boxes))
        # in a crowd a neighbour's face overlaps this one's box: the sizes must agree too
        ratio = np.array([[box_size(d.box) / box_size(c) for d in dets] for c in claim])
        iou[(ratio < 1 / MAX_SIZE_RATIO) | (ratio > MAX_SIZE_RATIO)] = 0.0
        pairs = sorted(np.argwhere(iou >= self.opt.match_iou).tolist(), key=lambda p: -iou[p[0], p[1]])
        near: list[tuple[float, int, int]] = []
        for ti, t in enumerate(self.live):
            gap = f - t.last
            if gap < 2:
                continue
            size = box_size(claim[ti])
            reach = size * min(self.opt.max_speed * gap, 1.5)
            for di, d in enumerate(dets):
                dist = float(np.linalg.norm(d.centre - (claim[ti][:2] + claim[ti][2:]) / 2))
                if dist <= reach and 1 / MAX_SIZE_RATIO <= ratio[ti, di] <= MAX_SIZE_RATIO:
                    near.append((dist / size, ti, di))
        return pairs + [(ti, di) for _, ti, di in sorted(near)]

    def _agrees(self, r: MeshResult, d: Face) -> bool:
        """The mesh fitted from a detection flags a face, and that face is the detection's (in a crowd the mesh
        can settle on a neighbour's face inside the enlarged region)."""
        return r.score >= self.opt.mesh_score and iou_matrix(mesh_box(r.points)[None], d.box[None])[0, 0] >= \
            self.opt.drift_iou

    @staticmethod
    def _ahead(t: _Live) -> np.ndarray:
        """The last mesh moved on by its last step: the mesh regresses a face centred in its region and lags a
        fast face (an eye distance behind after a few frames) when the region is only the previous frame's."""
        before = t.measured.get(t.last - 1)
        if before is None or before.points468 is None:
            return t.points
        step = t.points[:, :2].mean(0) - before.points468[:, :2].mean(0)
        return t.points + np.append(step, 0.0)

    @staticmethod
    def _predict(t: _Live, f: int) -> np.ndarray:
        """The last box moved on at the track's last velocity: a fast face leaves its old box within frames."""
        box = t.measured[t.last].box
        before = t.measured.get(t.last - 1)
        if before is None:
            return box
        return box + (box - before.box) * (f - t.last)

    def _start_tracks(self, f: int, im: np.ndarray, dets: list[Face]) -> None:
        for d in sorted(dets, key=lambda d: -d.score):
            here = [t.measured[f].box for t in self.live if f in t.measured]
            if here and iou_matrix(d.box[None], np.stack(here)).max() >= self.opt.match_iou:
                continue  # a face already followed: the detector's second box on it
            r = self.mesh.fit_face(im, d)
            flagged = self._agrees(r, d)
            s = _sample(f, r, Source.DETECTED, r.score if flagged else 0.5 * d.score, None if flagged else d.box)
            t = _Live(self.next_id, {}, r.points, f - 1, det_scores=[d.score])
            self.next_id += 1
            self._measure(t, s, r)
            self._follow_back(t, f, r, s, flagged)
            self.live.append(t)

    def _follow_back(self, t: _Live, f: int, res: MeshResult, s: FaceSample, flagged: bool) -> None:
        """A face that came into view between key frames: followed backwards through the frames since the last key
        frame (by the mesh, or for a face the mesh does not flag by the detector near it), so it is not missing
        there."""
        for g in range(f - 1, f - self.opt.key_interval, -1):
            im = self.recent.get(g)
            if im is None or g in self.opt.fail_frames:
                return
            if flagged:
                res = self.mesh.track(im, res.points)
                if res.score < self.opt.mesh_score:
                    return
                s = _sample(g, res, Source.TRACKED, res.score)
            else:
                near = [d for d in self._detect_near(im, s.box)
                        if iou_matrix(d.box[None], s.box[None])[0, 0] >= self.opt.match_iou]
                if not near:
                    return
                d = max(near, key=lambda d: d.score)
                res = self.mesh.fit_face(im, d)
                s = _sample(g, res, Source.DETECTED, 0.5 * d.score, d.box)
                t.det_scores.append(d.score)
                t.mesh_scores.append(res.score)
            others = [u.measured[g].box for u in self.live if g in u.measured]
            if others and iou_matrix(s.box[None], np.stack(others)).max() >= self.opt.match_iou:
                return  # already another track's face there
            t.measured[g] = s
            t.face_frames += int(flagged)

    def _merge_duplicates(self, f: int) -> None:
        """Two tracks on one face (a follower drifted onto a neighbour): the one with fewer face frames ends."""
        here = [t for t in self.live if f in t.measured]
        for i, a in enumerate(here):
            for b in here[i + 1:]:
                if a.ended or b.ended:
                    continue
                if iou_matrix(a.measured[f].box[None], b.measured[f].box[None])[0, 0] >= self.opt.duplicate_iou:
                    loser = min((a, b), key=lambda t: (t.face_frames, -t.track_id))
                    del loser.measured[f]
                    loser.ended = True

    def _is_face(self, t: _Live) -> bool:
        """Track consistency: the mesh flagged it a face on enough frames, or, for faces too small for the flag,
        the detector found it again and again with a good median score."""
        opt = self.opt
        if not t.measured:
            return False
        if t.face_frames >= opt.min_face_frames:
            return True
        size = float(np.median([box_size(s.box) for s in t.measured.values()]))
        lone = len(t.det_scores) < FollowOptions.min_face_frames
        return (size < opt.small_face and len(t.det_scores) >= opt.min_face_frames
                and float(np.median(t.det_scores)) >= (opt.lone_detection_score if lone else opt.detection_score)
                and float(np.median(t.mesh_scores)) >= opt.small_mesh_score)

    def finish(self) -> list[FaceTrack]:
        out = []
        for t in sorted(self.done + self.live, key=lambda t: t.track_id):
            if not self._is_face(t):
                continue
            frames = sorted(t.measured)
            # an unbridged frame inside a track (a gap longer than bridging) cannot happen: such a track ended
            out.append(FaceTrack(t.track_id, [t.measured[k] for k in frames]))
        return out


def follow(frames: Sequence[int], read_u8: Callable[[int], np.ndarray], detector: Any, landmarker: Any,
           options: FollowOptions = FollowOptions(), cuts: Sequence[int] | None = None) -> ShotFaces:
    """Face tracks over consecutive ``frames`` (absolute numbers). ``read_u8(f)`` gives frame f as (H, W, 3)
    uint8 RGB; frames are read once, in order. ``cuts`` are the frames that start a new shot (from the shot
    analysis); None detects them here (``engine.stages.shot_cuts``, one extra read of every frame)."""
    fl = [int(f) for f in frames]
    if not fl:
        raise ValueError("follow needs at least one frame number")
    if any(b != a + 1 for a, b in zip(fl[:-1], fl[1:], strict=True)):
        raise ValueError(f"follow wants consecutive frame numbers (one shot range), got {fl[:3]}...{fl[-3:]}; "
                         "pass the whole range and pick frames from the result")
    if options.key_interval < 1:
        raise ValueError(f"key_interval must be at least 1, got {options.key_interval}")
    if options.check_interval < 1:
        raise ValueError(f"check_interval must be at least 1, got {options.check_interval}")
    if cuts is None:
        cuts = [fl[i] for i in detect_cuts(read_u8(f) for f in fl)]
    starts = sorted({fl[0], *(c for c in cuts if fl[0] < c <= fl[-1])})
    keys = set(key_frames(fl, starts, options.key_interval))
    tracks: list[FaceTrack] = []
    shot: _ShotFollower | None = None
    for f in fl:
        if f in starts:  # a new shot: every track of the previous one ends here
            if shot is not None:
                tracks += shot.finish()
            shot = _ShotFollower(detector, landmarker, options, shot.next_id if shot is not None else 0)
        im = read_u8(f)
        if im.ndim != 3 or im.shape[2] != 3 or im.dtype != np.uint8:
            raise ValueError(f"frame {f}: read_u8 must give (H, W, 3) uint8 RGB, got {im.dtype} {im.shape}")
        assert shot is not None
        shot.step(f, im, f in keys)
    assert shot is not None
    tracks += shot.finish()
    return ShotFaces(fl, starts, tracks)
