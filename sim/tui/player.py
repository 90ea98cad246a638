"""Play, pause and speed: shared by the main screen and the workshop."""

from __future__ import annotations

#: Play speeds, in deliveries per second.
SPEEDS = (1, 2, 4, 8, 16, 50, 200)


class Player:
    """Mixin for an App that delivers on a timer. The App defines ``play_one() -> bool`` (one
    delivery; False when nothing more will happen) and ``show_play()`` (redraw after a change)."""

    playing = False
    speed_i = 2
    _timer = None

    @property
    def speed(self) -> int:
        return SPEEDS[self.speed_i]

    def _arm(self) -> None:
        if self._timer is not None:
            self._timer.stop()
        self._timer = self.set_interval(max(0.05, 1 / self.speed), self._play_tick)

    def _play_tick(self) -> None:
        if not self.playing:
            return
        # Faster than 20 a second, several deliveries per tick.
        for _ in range(max(1, round(self.speed * max(0.05, 1 / self.speed)))):
            if not self.play_one():
                self._stop_play()
                break
        self.show_play()

    def _stop_play(self) -> None:
        self.playing = False
        if self._timer is not None:
            self._timer.stop()
            self._timer = None

    def action_toggle_play(self) -> None:
        if self.playing:
            self._stop_play()
        else:
            self.playing = True
            self._arm()
        self.show_play()

    def action_faster(self) -> None:
        self.speed_i = min(self.speed_i + 1, len(SPEEDS) - 1)
        if self.playing:
            self._arm()
        self.show_play()

    def action_slower(self) -> None:
        self.speed_i = max(self.speed_i - 1, 0)
        if self.playing:
            self._arm()
        self.show_play()
